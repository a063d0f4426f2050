"""Where in hosts.yaml a problem is: the ``FILE:LINE: field: problem`` lines.

Every problem in hosts.yaml is reported as one line naming the file, the line and
the field, so a person can jump straight to it. This module turns what the loader
finds (a composing problem from :mod:`gputui.config.yamlbounds`, a pydantic
``ValidationError``) into those lines by walking the YAML node tree, and records
the lines of the keys so checks after loading can name a line too.

It knows nothing of :mod:`gputui.config.models`'s models: the loader
(:mod:`gputui.config.loader`) passes in the node tree, the source name and the errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml
from pydantic import ValidationError

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.config.yamlbounds import Loc, Problem, line_of_mark

__all__ = [
    "HOST_NAME",
    "MAX_ERROR_LINES",
    "capped",
    "error_lines",
    "key_lines",
    "line_number",
    "problem_line",
]

HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
"""A valid host name; only a valid one labels a host's errors, as ``hosts[2](gpu03)``."""
MAX_ERROR_LINES = 50
"""Error lines shown for one file; the rest are counted in a last line."""
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def capped(lines: Iterator[str] | list[str]) -> list[str]:
    """At most ``MAX_ERROR_LINES`` lines, then one that counts the rest."""
    lines = list(lines)
    if len(lines) <= MAX_ERROR_LINES:
        return lines
    shown, rest = lines[:MAX_ERROR_LINES], lines[MAX_ERROR_LINES:]
    head = rest[0].split(": ", 1)[0]
    said = _("(more): {n} more problems not shown").format(n=len(rest))
    return [*shown, f"{head}: {said}"]


def problem_line(problem: Problem, source: str, root: yaml.Node | None) -> str:
    """A composing problem as ``FILE:LINE: field: problem``."""
    return f"{source}:{problem.line}: {_field_text(problem.loc, root)}: {problem.message}"


def _key_text(key: object) -> str:
    """A key as an error path shows it: plain names as they are, anything else quoted
    (and cleaned), with no ``:`` so the line still parses as ``FILE:LINE: field:``."""
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) or text == "[key]":
        return text
    return repr(clean(text, 40)).replace(":", "\\x3a")


def _field_text(loc: Loc, root: yaml.Node | None) -> str:
    parts: list[str] = []
    for key in loc:
        if isinstance(key, int):
            parts.append(f"[{key}]")
        else:
            parts.append(("." if parts else "") + _key_text(key))
    text = "".join(parts)
    # hosts[2] -> hosts[2](gpu03) when the host's name is known (and a valid name).
    if len(loc) > 1 and loc[0] == "hosts" and isinstance(loc[1], int) and root is not None:
        name = _host_name(root, loc[1])
        if name:
            text = text.replace(f"hosts[{loc[1]}]", f"hosts[{loc[1]}]({name})", 1)
    return text or "(top level)"


def key_lines(root: yaml.Node | None) -> dict[str, int]:
    """Lines of the top-level keys, of each section's keys, of each host's keys and
    of each team channel's (``notify.channels``), so checks after loading (empty
    hosts, key files, theme, a channel's URL) can name a line."""
    lines: dict[str, int] = {}

    def keys(node: yaml.Node, prefix: str) -> Iterator[tuple[str, yaml.Node]]:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and isinstance(key.value, str):
                    field = f"{prefix}.{key.value}" if prefix else key.value
                    lines.setdefault(field, line_of_mark(key.start_mark))
                    yield field, value

    if root is None:
        return lines

    def items(node: yaml.Node, field: str) -> None:
        for i, item in enumerate(node.value):
            lines.setdefault(f"{field}[{i}]", line_of_mark(item.start_mark))
            for _key in keys(item, f"{field}[{i}]"):
                pass

    for field, value in keys(root, ""):
        if field == "hosts" and isinstance(value, yaml.SequenceNode):
            items(value, field)
            continue
        for inner, node in keys(value, field):
            if inner == "notify.channels" and isinstance(node, yaml.SequenceNode):
                items(node, inner)  # each team channel's keys (checked after loading)
    return lines


def line_number(line: str) -> int:
    match = re.match(r"^.*?:(\d+): ", line)
    return int(match.group(1)) if match else 0


def error_lines(exc: ValidationError, root: yaml.Node | None, source: str) -> Iterator[str]:
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        node, field_path = _locate(root, loc)
        line = node.start_mark.line + 1 if node is not None else 1
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        kind = error.get("type")
        message = _pydantic_said(str(kind), error.get("ctx"), message)
        given = error.get("input")
        if kind == "extra_forbidden":
            message = _("unknown key")
        elif kind in ("int_type", "float_type") and isinstance(given, bool):
            message = _("must be a number, not {value}").format(value=str(given).lower())
        elif kind in ("int_type", "float_type") and isinstance(given, str):
            plain = isinstance(node, yaml.ScalarNode) and not node.style  # not quoted
            message = (
                _text_for_number(given, whole=kind == "int_type") if plain else _not_text(given)
            )
        elif kind == "string_type" and isinstance(given, (bool, int, float)):
            message = _("{message}: quote it if you mean the text").format(message=message)
        yield f"{source}:{line}: {field_path}: {message}"


_NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_IN_RANGE = 2.0**53
"""Beyond this no number in hosts.yaml means anything (and a float stops being exact)."""


PYDANTIC_SAID = {
    "missing": N_("Field required"),
    "greater_than": N_("Input should be greater than {gt}"),
    "greater_than_equal": N_("Input should be greater than or equal to {ge}"),
    "less_than": N_("Input should be less than {lt}"),
    "less_than_equal": N_("Input should be less than or equal to {le}"),
    "string_type": N_("Input should be a valid string"),
    "bool_type": N_("Input should be a valid boolean"),
    "bool_parsing": N_("Input should be a valid boolean, unable to interpret input"),
    "int_type": N_("Input should be a valid integer"),
    "int_parsing": N_("Input should be a valid integer, unable to parse string as an integer"),
    "int_from_float": N_("Input should be a valid integer, got a number with a fractional part"),
    "float_type": N_("Input should be a valid number"),
    "float_parsing": N_("Input should be a valid number, unable to parse string as a number"),
    "literal_error": N_("Input should be {expected}"),
    "string_too_long": N_("String should have at most {max_length} characters"),
    "string_too_short": N_("String should have at least {min_length} characters"),
    "too_long": N_("List should have at most {max_length} items, not {actual_length}"),
    "too_short": N_("List should have at least {min_length} items, not {actual_length}"),
    "dict_type": N_("Input should be a valid dictionary"),
    "list_type": N_("Input should be a valid list"),
    "model_type": N_("Input should be a valid dictionary or instance of {class_name}"),
    "finite_number": N_("Input should be a finite number"),
    "string_pattern_mismatch": N_("String should match pattern '{pattern}'"),
}  # fmt: skip
"""pydantic's messages by their type (the English it says), translated here: the
language chosen says them, with pydantic's figures (its ``ctx``) in them."""


def _pydantic_said(kind: str, ctx: object, message: str) -> str:
    """``message`` (pydantic's) in the language chosen where its type is one of
    ``PYDANTIC_SAID``; as pydantic said it otherwise (and in English, always)."""
    template = PYDANTIC_SAID.get(kind)
    if template is None:
        return message
    said = _(template)
    if said == template:
        return message
    fields = {k: str(v) for k, v in ctx.items()} if isinstance(ctx, dict) else {}
    if kind == "literal_error" and " or " in fields.get("expected", ""):
        choices, _or, last = fields["expected"].rpartition(" or ")
        fields["expected"] = _("{choices} or {last}").format(choices=choices, last=last)
    try:
        return said.format(**fields)
    except (KeyError, IndexError, ValueError):
        return message


def _not_text(given: str) -> str:
    return _("must be a number, not the text {text}").format(text=repr(clean(given, 40)))


def _text_for_number(given: str, *, whole: bool) -> str:
    """Why an unquoted text is not the number a field wants: YAML reads ``1e308`` (no
    dot, no sign on the exponent) as text, so say what it is as a number."""
    if len(given) > 400 or not _NUMBER_TEXT.fullmatch(given.strip()):
        return _not_text(given)
    value = float(given)
    if not abs(value) < _IN_RANGE:
        return _("the number {number} is out of range").format(number=clean(given.strip(), 40))
    if whole:
        written = str(int(value)) if value.is_integer() else _("a whole number")
    else:
        written = repr(value)
    return _("must be a number: YAML reads {text} as text (write {written})").format(
        text=repr(clean(given, 40)), written=written
    )


def _locate(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, str]:
    """Follow a pydantic error location through the YAML node tree to its line."""
    node = root
    path: list[str | int] = []
    for key in loc:
        if isinstance(key, int):
            path.append(key)
            if isinstance(node, yaml.SequenceNode) and 0 <= key < len(node.value):
                node = node.value[key]
            continue
        if not isinstance(key, str) or key in ("function-after", "function-before"):
            continue
        path.append(key)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == key:
                    node = value_node
                    break
    return node, _field_text(tuple(path), root)


def _host_name(root: yaml.Node, index: int) -> str | None:
    """The ``name:`` of the index-th host in the YAML tree, to label its errors."""
    if not isinstance(root, yaml.MappingNode):
        return None
    hosts = next((v for k, v in root.value if k.value == "hosts"), None)
    if not isinstance(hosts, yaml.SequenceNode) or not 0 <= index < len(hosts.value):
        return None
    item = hosts.value[index]
    if not isinstance(item, yaml.MappingNode):
        return None
    for key, value in item.value:
        if key.value == "name" and isinstance(value, yaml.ScalarNode):
            name = str(value.value)
            return name if HOST_NAME.fullmatch(name) else None
    return None
