"""What the head says to a person, in words each client puts in its own language.

The head serves users of many languages, so it never translates. Each refusal and
notice it sends carries its English line (``message`` / ``text``: what old clients,
logs, the audit and ``--json`` show, unchanged) and beside it the English template
and its named arguments: ``"msg": "no job {job}", "args": {"job": 12}``. The head
builds both from one ``Words`` (``say``), so the English line is the template filled.

A client shows ``_(msg)`` filled with ``args`` (``shown``) where its own catalogue
has ``msg``, else the English line. Everything from the head is untrusted:

- only a template found in the local catalogue is ever filled, never one the head
  sent; and filling is plain substitution of ``{name}`` fields (no attribute,
  index or format spec: ``{0.__class__}`` is left as text), never ``str.format``;
- the args are a flat object of at most ``MAX_ARGS`` names (``[a-z_][a-z0-9_]*``)
  whose values are text (control characters stripped, capped), integers or finite
  numbers; a template field the args do not give, or args that are not that, and the
  English line is shown instead.

An arg may be a moment (``At``): it travels as ``{"at": T}`` (seconds since the
epoch) and is shown in the client's local time, in its language's format; the English
line has it as the head wrote it (``Mon 30 Nov 09:00``, the head's local time).
An arg may itself be words (``"force-free: {why}"`` with ``why`` the line that
names no host): it travels as ``{"msg": ..., "args": {...}}`` and is shown the same
way; its own args may be words too, ``MAX_DEPTH`` levels below the message at most.
An arg may be a list of words (``"pid {pid} on {host} GPU {gpu}"`` for each of a
few processes): it travels as a list of such objects (at most ``MAX_LIST``) and is
shown each the same way, joined by the language's ", ". One message carries at most
``MAX_WORDS`` words, its own, nested ones and list items counted. The head keeps to
these bounds when it sends: words deeper than ``MAX_DEPTH`` or past ``MAX_WORDS`` go
as their English line (text), and a list longer than ``MAX_LIST`` goes as its first
items and then ``"and {count} more"`` (the English line names them all). A client
shows anything past the bounds as the English line.
An arg named ``state`` is a job state code and is shown in the
chosen language (``job_words``); every other arg is data (names, numbers, the user's
own words).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from gputui.common.i18n import N_, _, language, translates
from gputui.common.job_words import state_text
from gputui.common.printable import shown as printable

__all__ = [
    "MAX_ARGS",
    "MAX_DEPTH",
    "MAX_LIST",
    "MAX_WORDS",
    "MORE",
    "Arg",
    "At",
    "Words",
    "fields_of",
    "fill",
    "joined",
    "say",
    "shown",
    "told_text",
    "words_of",
]

MAX_ARGS = 16
"""The most args one message carries."""
MAX_LIST = 8
"""The most words one list arg carries."""
MAX_DEPTH = 4
"""How many levels below a message its words args nest at most (an arg that is words
is one level below; a part of a joined line's arg that is a health finding's title
with a figure of its own is four)."""
MAX_WORDS = 64
"""The most words one message carries, itself, nested words and list items counted."""
MORE = N_("and {count} more")
"""The last item of a list (or the last part of a joined line) past its cap."""
MAX_ARG_CHARS = 512
"""An arg's text is capped to this many characters."""
MAX_MSG_CHARS = 1024
"""A template longer than this is not looked up."""
MAX_LINE_CHARS = 2048
"""The filled line is capped to this many characters."""

NAME = re.compile(r"[a-z_][a-z0-9_]{0,31}\Z")
"""An arg's name."""
_PART = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]{0,31})\}|[{}]")
"""In a template: an escaped brace, a plain ``{name}`` field, or a stray brace."""

Arg: TypeAlias = "str | int | float | At | Words | tuple[Words, ...]"
"""What an arg may be (words, or a tuple of them, nested to ``MAX_DEPTH``)."""

WHEN = N_("%a %d %b %H:%M")
"""How a moment reads (``time.strftime``): ``Mon 30 Nov 09:00``; the catalogue gives
each language its own."""
LATEST_AT = 2.0**40
"""A moment past this (seconds since the epoch) is malformed."""


@dataclass(frozen=True, slots=True)
class At:
    """A moment in a message: shown in the reader's local time and language."""

    t: float

    def english(self) -> str:
        return time.strftime(WHEN, time.localtime(self.t))


def fields_of(template: str) -> set[str] | None:
    """The ``{name}`` fields of ``template``; None where it has a brace that is not a
    plain field or an escaped brace (``{0}``, ``{a.b}``, ``{n:>4}``, a lone ``{``)."""
    out: set[str] = set()
    for match in _PART.finditer(template):
        token = match.group()
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            return None
        out.add(match.group(1))
    return out


def fill(template: str, args: Mapping[str, str]) -> str | None:
    """``template`` with each ``{name}`` replaced by ``args[name]`` (text only: no
    attribute or format spec is ever evaluated); None where a field is not in
    ``args`` or a brace is stray."""
    out: list[str] = []
    at = 0
    for match in _PART.finditer(template):
        out.append(template[at : match.start()])
        at = match.end()
        token = match.group()
        if token in ("{{", "}}"):
            out.append(token[0])
            continue
        name = match.group(1)
        if name is None or name not in args:
            return None
        out.append(args[name])
    out.append(template[at:])
    return "".join(out)


def _english(value: Arg) -> str:
    if isinstance(value, tuple):
        return ", ".join(w.english() for w in value)
    if isinstance(value, (Words, At)):
        return value.english()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, slots=True)
class Words:
    """One message of the head's: its English template and its named args."""

    msg: str
    args: dict[str, Arg] = field(default_factory=dict)
    line: str | None = None
    """The English line where it is not the template filled: a line of more parts than
    its words name (``joined``) names them all."""

    def english(self) -> str:
        """The English line: the template filled with the args as they are."""
        if self.line is not None:
            return self.line
        filled = fill(self.msg, {k: _english(v) for k, v in self.args.items()})
        return self.msg if filled is None else filled

    def wire(self) -> dict[str, Any]:
        """The ``msg`` and ``args`` fields of an answer or a notice, within the bounds a
        client takes (``MAX_DEPTH``, ``MAX_WORDS``, ``MAX_LIST``: past them, English)."""
        return self._wire(1, [MAX_WORDS - 1])

    def _wire(self, depth: int, budget: list[int]) -> dict[str, Any]:
        """This message's fields, its words args at ``depth``; ``budget``: how many
        more words may go."""
        args = {k: _wire(v, depth, budget) for k, v in self.args.items()}
        return {"msg": self.msg, "args": args}


def _wire(value: Arg, depth: int, budget: list[int]) -> Any:
    if isinstance(value, tuple):
        items = list(value)
        if len(items) > MAX_LIST:
            rest = len(items) - (MAX_LIST - 1)
            items = [*items[: MAX_LIST - 1], say(MORE, count=rest)]
        if depth > MAX_DEPTH or budget[0] < len(items):
            return _english(value)
        budget[0] -= len(items)
        return [w._wire(depth + 1, budget) for w in items]
    if isinstance(value, Words):
        if depth > MAX_DEPTH or budget[0] < 1:
            return value.english()
        budget[0] -= 1
        return value._wire(depth + 1, budget)
    if isinstance(value, At):
        return {"at": value.t}
    return value


def say(msg: str, **args: Arg) -> Words:
    """The head's words: ``msg`` a template marked with ``N_`` at the call site
    (``say(N_("no job {job}"), job=12)``), its fields exactly the ``args``."""
    return Words(msg, args)


def words_of(raw: object) -> Words | None:
    """The ``msg``/``args`` of an answer's error or a notice as the head sent them
    (not yet cleaned: ``shown`` does that); None where there are none."""
    if not isinstance(raw, Mapping):
        return None
    msg, args = raw.get("msg"), raw.get("args")
    if not isinstance(msg, str):
        return None
    return Words(msg, dict(args) if isinstance(args, Mapping) else {})


@dataclass(slots=True)
class _Budget:
    """How many more words a client fills for one message (``MAX_WORDS`` in all)."""

    left: int = MAX_WORDS


def _cleaned(args: object, depth: int, budget: _Budget) -> dict[str, str] | None:
    """The head's args as text to show, or None where they are malformed (an arg
    that is words, at ``depth`` below the message, shown as ``_translated`` shows it)."""
    if not isinstance(args, Mapping) or len(args) > MAX_ARGS:
        return None
    out: dict[str, str] = {}
    for name, value in args.items():
        if not isinstance(name, str) or not NAME.match(name):
            return None
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            if not -(2**63) <= value < 2**63:
                return None
            text = str(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return None
            text = f"{value:g}"
        elif isinstance(value, str):
            text = printable(value, MAX_ARG_CHARS)
            if name == "state":
                text = state_text(text)
        elif isinstance(value, Mapping) and set(value) == {"at"}:
            at = value["at"]
            if isinstance(at, bool) or not isinstance(at, (int, float)):
                return None
            if not 0 <= at < LATEST_AT:
                return None
            text = printable(time.strftime(_(WHEN), time.localtime(at)), MAX_ARG_CHARS)
        elif depth <= MAX_DEPTH and isinstance(value, Mapping):
            inner = _translated(value.get("msg"), value.get("args"), depth, budget)
            if inner is None:
                return None
            text = inner
        elif depth <= MAX_DEPTH and isinstance(value, list) and len(value) <= MAX_LIST:
            parts: list[str] = []
            for w in value:
                part = (
                    _translated(w.get("msg"), w.get("args"), depth, budget)
                    if isinstance(w, Mapping)
                    else None
                )
                if part is None:
                    return None
                parts.append(part)
            text = _(", ").join(parts)
        else:
            return None
        out[name] = text
    return out


def shown(text: str, msg: object = None, args: object = None) -> str:
    """The line to show for what the head said: ``text`` (its English) in English or
    where ``msg`` is not a template of the local catalogue or anything is malformed;
    else the catalogue's translation of ``msg`` filled with the cleaned ``args``."""
    if language() == "en":
        return text
    return _translated(msg, args, 0, _Budget()) or text


def told_text(answer: object, field: str = "told") -> str:
    """An answer's ``field`` (``told``: what a job action does next) as the reader
    reads it: the English line, or its ``<field>_words`` in the chosen language;
    "" where the answer has none."""
    if not isinstance(answer, Mapping):
        return ""
    text = answer.get(field)
    if not isinstance(text, str) or not text:
        return ""
    words = answer.get(f"{field}_words")
    if not isinstance(words, Mapping):
        return text
    return shown(text, words.get("msg"), words.get("args"))


def _translated(msg: object, args: object, depth: int, budget: _Budget) -> str | None:
    """The catalogue's translation of ``msg`` (words ``depth`` levels below the
    message) filled with ``args``; None where ``msg`` is not one of its templates,
    anything is malformed, or the message is past ``MAX_DEPTH`` or ``MAX_WORDS``."""
    if budget.left <= 0:
        return None
    budget.left -= 1
    if not isinstance(msg, str) or not msg or len(msg) > MAX_MSG_CHARS:
        return None
    if not translates(msg):  # not in the catalogue: never fill the head's own template
        return None
    translated = _(msg)
    wanted, given = fields_of(msg), fields_of(translated)
    if wanted is None or given is None or not given <= wanted:
        return None
    cleaned = _cleaned({} if args is None and not wanted else args, depth + 1, budget)
    if cleaned is None or not wanted <= set(cleaned):
        return None
    filled = fill(translated, cleaned)
    return None if filled is None else filled[:MAX_LINE_CHARS]


_JOINED = (
    N_("{a}; {b}"),
    N_("{a}; {b}; {c}"),
    N_("{a}; {b}; {c}; {d}"),
    N_("{a}; {b}; {c}; {d}; {e}"),
    N_("{a}; {b}; {c}; {d}; {e}; {f}"),
    N_("{a}; {b}; {c}; {d}; {e}; {f}; {g}"),
    N_("{a}; {b}; {c}; {d}; {e}; {f}; {g}; {h}"),
)
"""Two to eight parts of a line, by how many."""


def joined(parts: Sequence[Words]) -> Words:
    """``parts`` as one line, joined by "; " (the English line exactly that). Past
    eight parts, the words name the first seven and then how many more."""
    if len(parts) <= 1:
        return parts[0] if parts else Words("")
    most = len(_JOINED) + 1
    named: list[Words] = list(parts)
    if len(parts) > most:
        named = [*parts[: most - 1], say(MORE, count=len(parts) - (most - 1))]
    names = "abcdefgh"
    said = say(_JOINED[len(named) - 2], **{names[i]: v for i, v in enumerate(named)})
    if len(parts) <= most:
        return said
    return Words(said.msg, said.args, "; ".join(p.english() for p in parts))
