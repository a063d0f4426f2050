"""hosts.yaml's YAML, read under bounds: bytes in, a checked YAML node graph out.

hosts.yaml is untrusted input as far as the terminal is concerned, and PyYAML's own
loader would let a small file hang or exhaust the console (an alias bomb, nesting
past the recursion limit, a million-entry list) or carry escape sequences into it.
Here every such file fails fast, with one ``FILE:LINE: field: problem`` line:

* the YAML is composed once, and composition stops at the first list or mapping
  over ``MAX_ENTRIES`` entries (so at most ``MAX_HOSTS`` hosts), at nesting over
  ``MAX_DEPTH`` levels, and once aliases would expand the document past
  ``MAX_VALUES`` values ("billion laughs"); an alias to a value that contains it
  is refused;
* every string (keys included) is refused if it carries a control character, an
  escape sequence, a bidi override or other invisible formatting character, or is
  over ``MAX_STRING`` characters: a typo is better flagged than silently changed;
* only YAML's plain types are allowed (string, number, bool, null, list, mapping,
  merge key): any other tag is refused, and a date-like value stays a string.

The loader that composes with these is :mod:`gputui.config.loader`; the models are
:mod:`gputui.config.models`'s, the search order :mod:`gputui.common.locations`'s and
the error lines about fields :mod:`gputui.config.where`'s.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import yaml
import yaml.constructor
import yaml.resolver

from gputui.common.i18n import N_, _

MAX_HOSTS = 10_000
"""Hosts one config may list."""
MAX_ENTRIES = MAX_HOSTS
"""Entries in any one YAML list or mapping (the host list is the longest there is)."""
MAX_DEPTH = 32
"""Nesting levels, counted through aliases; the schema itself needs five."""
MAX_VALUES = 500_000
"""Values (YAML nodes) in the document once aliases are expanded."""
MAX_STRING = 4096
"""Characters in any one string."""

_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(
    _TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge")
)
_REFUSED_CATEGORIES = {
    "Cc": N_("a control character"),
    "Cf": N_("an invisible formatting or bidi character"),
    "Cs": N_("a lone surrogate"),
    "Zl": N_("a line separator"),
    "Zp": N_("a paragraph separator"),
}


def _clean(value: str, most: int) -> str:
    """``gputui.common.text.clean``, imported for a line that shows a refused value
    only (it loads Rich's cell widths: a verb that reads hosts.yaml need not)."""
    from gputui.common.text import clean

    return clean(value, most)


def codepoint(char: str) -> str:
    """``char`` as an error line names it: ``U+001B``."""
    return f"U+{ord(char):04X}"


def _refused_char(value: str) -> tuple[int, str, str] | None:
    """The first character of ``value`` no config string may hold: index, code point
    and what it is. Controls include ESC, so every escape sequence is caught here."""
    if value.isascii() and value.isprintable():
        return None
    for index, char in enumerate(value):
        kind = _REFUSED_CATEGORIES.get(unicodedata.category(char))
        if kind is not None:
            return index, codepoint(char), kind
    return None


class _Resolver(yaml.resolver.Resolver):
    """YAML's implicit types minus timestamps and ``=``: a date-like name or a bare
    ``=`` stays a string instead of becoming a date or an unconstructable value."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag in _ALLOWED_TAGS]
        for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    }


class Constructor(yaml.constructor.SafeConstructor):
    """SafeConstructor whose value errors (``0x_``, ``._``) come back as YAML errors
    with the value's line, instead of escaping as a bare ``ValueError``."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value ({exc})", node.start_mark
            ) from None


_LIBYAML: bool = bool(getattr(yaml, "__with_libyaml__", False))


def _events(data: bytes) -> Any:
    """A YAML event source: libyaml's parser where PyYAML has it, else PyYAML's own.

    Either way only events are taken from it; composing is ours, under the limits.
    """
    if _LIBYAML:
        from yaml._yaml import CParser

        return CParser(data)

    class _PyParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
        def __init__(self, stream: bytes) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)

    return _PyParser(data)


Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem found while composing: its line, where in the document, what."""

    line: int
    loc: Loc
    message: str


class Abort(Exception):
    """A limit was hit: composing stops at once, with this one problem."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class Composer:
    """Builds the YAML node graph from parser events, as PyYAML's Composer does,
    while counting what an alias bomb or a runaway file would otherwise make cheap:

    * every node's expanded size (values below it, aliases followed) and height
      are known once it is complete, so an alias adds its target's size and height
      in O(1), and the limits stop a bomb at the first level that goes too far;
    * depth is checked on the way down, so deep nesting never reaches Python's
      recursion limit;
    * an alias to a node not yet complete (``&a [*a]``) would make a cycle: refused;
    * every scalar is checked for refused characters and length, every mapping for
      duplicate and non-scalar keys, every node for its tag; those problems are
      collected, one line each.
    """

    def __init__(self, data: bytes, source: str) -> None:
        self._events = _events(data)
        self._resolver = _Resolver()
        self._anchors: dict[str, yaml.Node] = {}
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (size, height)
        self._loc: list[str | int] = []
        self._key_next = False
        self.problems: list[Problem] = []

    def _resolve(self, kind: type[yaml.Node], value: str | None, implicit: Any) -> str:
        tag = self._resolver.resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return str(tag)

    def compose(self) -> yaml.Node | None:
        events = self._events
        events.get_event()  # stream start
        root: yaml.Node | None = None
        if not events.check_event(yaml.StreamEndEvent):
            events.get_event()  # document start
            root = self._node(1)
            events.get_event()  # document end
            if not events.check_event(yaml.StreamEndEvent):
                event = events.get_event()
                raise Abort(Problem(_line(event), (), "only one YAML document is allowed"))
        events.get_event()  # stream end
        return root

    def _abort(self, mark: Any, message: str) -> Abort:
        return Abort(Problem(line_of_mark(mark), tuple(self._loc), message))

    def _node(self, depth: int) -> yaml.Node:
        events = self._events
        is_key, self._key_next = self._key_next, False
        if events.check_event(yaml.AliasEvent):
            event = events.get_event()
            target = self._anchors.get(event.anchor)
            if target is None:
                raise self._abort(event.start_mark, f"alias *{event.anchor} is not defined")
            if id(target) not in self._measured:
                raise self._abort(
                    event.start_mark, f"alias *{event.anchor} is used inside its own anchor"
                )
            return target
        event = events.peek_event()
        if depth > MAX_DEPTH:
            del self._loc[4:]  # the path down is as long as the nesting: name its start
            raise self._abort(
                event.start_mark, f"nested more than {MAX_DEPTH} levels deep (the limit)"
            )
        anchor = event.anchor
        if anchor is not None and anchor in self._anchors:
            raise self._abort(event.start_mark, f"anchor &{anchor} is defined twice")
        node: yaml.Node
        if events.check_event(yaml.ScalarEvent):
            node = self._scalar(anchor, is_key)
        elif events.check_event(yaml.SequenceStartEvent):
            node = self._sequence(anchor, depth)
        else:
            node = self._mapping(anchor, depth)
        if node.tag not in _ALLOWED_TAGS:
            self._problem(node, f"the tag {_tag_text(node.tag)} is not allowed; use a plain value")
        return node

    def _problem(self, node: yaml.Node, message: str, loc: Loc | None = None) -> None:
        where = tuple(self._loc) if loc is None else loc
        self.problems.append(Problem(line_of_mark(node.start_mark), where, message))

    def _scalar(self, anchor: str | None, is_key: bool) -> yaml.ScalarNode:
        event = self._events.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self._resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(
            tag, event.value, event.start_mark, event.end_mark, style=event.style
        )
        if anchor is not None:
            self._anchors[anchor] = node
        self._measured[id(node)] = (1, 1)
        value: str = event.value
        if len(value) > MAX_STRING:
            said = (
                _("a key has {n} characters, over the {most} limit")
                if is_key
                else _("the value has {n} characters, over the {most} limit")
            )
            self._problem(node, said.format(n=len(value), most=MAX_STRING))
        else:
            refused = _refused_char(value)
            if refused is not None:
                index, codepoint, kind = refused
                said = (
                    _(
                        "a key contains {codepoint}, {kind}, at character {at}:"
                        " not allowed in hosts.yaml (without it: {without})"
                    )
                    if is_key
                    else _(
                        "the value contains {codepoint}, {kind}, at character {at}:"
                        " not allowed in hosts.yaml (without it: {without})"
                    )
                )
                self._problem(
                    node,
                    said.format(
                        codepoint=codepoint,
                        kind=_(kind),
                        at=index + 1,
                        without=repr(_clean(value, 60)),
                    ),
                )
        return node

    def _sequence(self, anchor: str | None, depth: int) -> yaml.SequenceNode:
        event = self._events.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self._resolve(yaml.SequenceNode, None, event.implicit)
        node = yaml.SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        if anchor is not None:
            self._anchors[anchor] = node
        size, height = 1, 1
        limit, what = (MAX_HOSTS, "hosts") if self._loc == ["hosts"] else (MAX_ENTRIES, "entries")
        while not self._events.check_event(yaml.SequenceEndEvent):
            if len(node.value) >= limit:
                raise self._abort(
                    self._events.peek_event().start_mark,
                    f"more than {limit} {what} (the limit)",
                )
            self._loc.append(len(node.value))
            child = self._node(depth + 1)
            self._loc.pop()
            node.value.append(child)
            size, height = self._grow(node, size, height, child)
        node.end_mark = self._events.get_event().end_mark
        self._measured[id(node)] = (size, height)
        return node

    def _mapping(self, anchor: str | None, depth: int) -> yaml.MappingNode:
        event = self._events.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self._resolve(yaml.MappingNode, None, event.implicit)
        node = yaml.MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        if anchor is not None:
            self._anchors[anchor] = node
        size, height = 1, 1
        seen: dict[str, int] = {}
        while not self._events.check_event(yaml.MappingEndEvent):
            if len(node.value) >= MAX_ENTRIES:
                raise self._abort(
                    self._events.peek_event().start_mark,
                    f"more than {MAX_ENTRIES} entries (the limit)",
                )
            self._key_next = True
            key = self._node(depth + 1)
            size, height = self._grow(node, size, height, key)
            if isinstance(key, yaml.ScalarNode):
                name = str(key.value)
                line = line_of_mark(key.start_mark)
                if key.tag == _TAG + "merge":
                    pass
                elif name in seen:
                    self._problem(
                        key,
                        _("duplicate key (first given on line {line})").format(line=seen[name]),
                        (*self._loc, name),
                    )
                else:
                    seen[name] = line
                self._loc.append(name)
            else:
                self._problem(key, _("a key must be a plain name, not a list or mapping"))
                self._loc.append("?")
            value = self._node(depth + 1)
            self._loc.pop()
            node.value.append((key, value))
            size, height = self._grow(node, size, height, value)
        node.end_mark = self._events.get_event().end_mark
        self._measured[id(node)] = (size, height)
        return node

    def _grow(self, node: yaml.Node, size: int, height: int, child: yaml.Node) -> tuple[int, int]:
        """Add a complete child's expanded size and height to its parent's, checking both."""
        child_size, child_height = self._measured[id(child)]
        size += child_size
        height = max(height, child_height + 1)
        if size > MAX_VALUES:
            raise self._abort(
                child.start_mark,
                f"expands to more than {MAX_VALUES} values through aliases (the limit)",
            )
        if height > MAX_DEPTH:
            raise self._abort(
                child.start_mark,
                f"nested more than {MAX_DEPTH} levels deep through aliases (the limit)",
            )
        return size, height


def _line(event: Any) -> int:
    return line_of_mark(getattr(event, "start_mark", None))


def line_of_mark(mark: Any) -> int:
    line = getattr(mark, "line", None)
    return line + 1 if isinstance(line, int) else 1


def _tag_text(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


def yaml_error_line(exc: yaml.YAMLError, data: bytes, source: str) -> str:
    """One ``FILE:LINE: yaml: problem`` line for a YAML syntax error, always with a line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = getattr(mark, "line", None)
    number = line + 1 if isinstance(line, int) else None
    position = getattr(exc, "position", None)
    if number is None and isinstance(position, int):
        number = data.count(b"\n", 0, position) + 1  # a ReaderError: a byte offset
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
    if not problem:
        problem = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    character = getattr(exc, "character", None)
    if isinstance(character, int):
        problem = f"{problem} ({codepoint(chr(character))})"
    return f"{source}:{number or 1}: yaml: {problem}"
