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
    return [*shown, f"{head}: (more): {len(rest)} more problems not shown"]


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
    """Lines of the top-level keys, of each section's keys and of each host's keys,
    so checks after loading (empty hosts, key files, theme) can name a line."""
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
    for field, value in keys(root, ""):
        if field == "hosts" and isinstance(value, yaml.SequenceNode):
            for i, item in enumerate(value.value):
                lines.setdefault(f"hosts[{i}]", line_of_mark(item.start_mark))
                for _ in keys(item, f"hosts[{i}]"):
                    pass
        else:
            for _ in keys(value, field):
                pass
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
        given = error.get("input")
        if kind == "extra_forbidden":
            message = "unknown key"
        elif kind in ("int_type", "float_type") and isinstance(given, bool):
            message = f"must be a number, not {str(given).lower()}"
        elif kind in ("int_type", "float_type") and isinstance(given, str):
            plain = isinstance(node, yaml.ScalarNode) and not node.style  # not quoted
            message = (
                _text_for_number(given, whole=kind == "int_type")
                if plain
                else f"must be a number, not the text {clean(given, 40)!r}"
            )
        elif kind == "string_type" and isinstance(given, (bool, int, float)):
            message = f"{message}: quote it if you mean the text"
        yield f"{source}:{line}: {field_path}: {message}"


_NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_IN_RANGE = 2.0**53
"""Beyond this no number in hosts.yaml means anything (and a float stops being exact)."""


def _text_for_number(given: str, *, whole: bool) -> str:
    """Why an unquoted text is not the number a field wants: YAML reads ``1e308`` (no
    dot, no sign on the exponent) as text, so say what it is as a number."""
    if len(given) > 400 or not _NUMBER_TEXT.fullmatch(given.strip()):
        return f"must be a number, not the text {clean(given, 40)!r}"
    value = float(given)
    if not abs(value) < _IN_RANGE:
        return f"the number {clean(given.strip(), 40)} is out of range"
    if whole:
        written = str(int(value)) if value.is_integer() else "a whole number"
    else:
        written = repr(value)
    return f"must be a number: YAML reads {clean(given, 40)!r} as text (write {written})"


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
