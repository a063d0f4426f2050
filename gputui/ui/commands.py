"""The console's ``:`` command line, as words: what each command is, how a typed line
parses, and how a half-typed one completes. No Textual and no I/O here.

The vocabulary is k9s's: ``:queue``, ``:usage``, ``:health``, ``:audit`` open a
view, ``:q`` quits, ``:sort util`` sorts, ``:claim 2 --pool a100`` claims. The
command palette (Ctrl+P) offers the same commands, so one list serves both.
``:claim`` takes what ``gputui claim`` takes, with the same types and ranges: the
flags of ``claim_parser`` are the CLI's (a test holds them equal; the console sits
below the CLI and cannot import it), the durations are read by the same
``parse_duration``, and a bad argument is one line, never a traceback or a print
to the terminal. One shorthand: a number first is a count (``:claim 2`` is
``gputui claim -g 2``).
"""

from __future__ import annotations

import argparse
import difflib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from gputui.common.durations import parse_duration
from gputui.common.text import clean

MAX_LINE = 500
"""Longest command line read (a longer one is refused, not cut)."""
MAX_CLAIM_S = 366 * 86_400.0
"""Longest ``--for`` a claim may ask (the CLI's parser has no upper bound)."""
MAX_TEXT = 200
"""Longest pool, model, host, project or note."""
MAX_GPUS = 64
"""The head's limit of GPUs a request (``arg_types.MAX_GPUS_PER_JOB``, as the CLI's)."""


class _Bad(Exception):
    """An argument ``claim_parser`` refuses; its message is the one line said."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Bad(message)


def gpu_count(text: str) -> int:
    """A whole number of GPUs, 1 to ``MAX_GPUS`` (the CLI's ``-g`` rule)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r}") from None
    if not 1 <= value <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_GPUS} GPUs, not {value}")
    return value


def claim_parser() -> argparse.ArgumentParser:
    """``gputui claim``'s arguments, read without printing or exiting."""
    c = _Parser(prog="claim", add_help=False, exit_on_error=False)
    c.add_argument("gpu", nargs="*")
    c.add_argument("-g", "--gpus", type=gpu_count)
    c.add_argument("--pool")
    c.add_argument("--model")
    c.add_argument("--host")
    c.add_argument("--for", dest="duration", type=parse_duration)
    c.add_argument("--note", default="")
    c.add_argument("--project")
    c.add_argument("--no-wait", action="store_true")
    c.add_argument("--json", action="store_true")
    return c


@dataclass(frozen=True, slots=True)
class Verb:
    """One command: its name, other spellings, what it takes and what it does."""

    name: str
    help: str
    aliases: tuple[str, ...] = ()
    takes: str = ""
    """What follows the name, as the help shows it (``KEY``, ``[TEXT]``)."""


VERBS: tuple[Verb, ...] = (
    Verb("queue", "The job queue, logs and actions", ("jobs",)),
    Verb("usage", "GPU-hours per user and group, utilisation by hour"),
    Verb("health", "Every problem in the cluster, ranked"),
    Verb("audit", "Who did what, when and why"),
    Verb("claim", "Claim GPUs, as gputui claim: :claim 2 --pool a100", takes="[ARGS]"),
    Verb("release", "Release your claim on the selected GPU (host line: all there)"),
    Verb("submit", "Enqueue a job (a form)"),
    Verb("env", "Copy the CUDA_VISIBLE_DEVICES line for the selected host"),
    Verb("drain", "Drain or undrain the selected GPU or host (admins; asks why)"),
    Verb("force-free", "Take the selected GPU back (admins; asks why)"),
    Verb("sort", "Sort the GPUs by KEY", takes="KEY"),
    Verb("filter", "Filter the GPUs by host, pool, model or user", takes="[TEXT]"),
    Verb("group", "Group by host, or one list across all hosts"),
    Verb("tree", "The processes as a tree per GPU (parents, container), or flat"),
    Verb("retry", "Reconnect the selected host now"),
    Verb("theme", "Next theme, or the one named", takes="[NAME]"),
    Verb("help", "Every key and command", ("h", "?")),
    Verb("quit", "Quit gputui", ("q", "q!", "exit")),
)
"""Every command of the ``:`` line and the palette, in the order the palette lists them."""

_BY_NAME = {spelling: verb for verb in VERBS for spelling in (verb.name, *verb.aliases)}


@dataclass(frozen=True, slots=True)
class Order:
    """A command line that parsed: the verb's name and what it was given."""

    verb: str
    arg: str = ""
    """``sort``'s key, ``filter``'s text, ``theme``'s name (empty: none given)."""
    claim: dict[str, Any] = field(default_factory=dict)
    """``claim``'s request (``AsyncBackend.claim``'s keywords)."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A command line that did not parse, and the one line that says why."""

    line: str


def parse(text: str, sort_keys: Sequence[str], themes: Sequence[str]) -> Order | Refused:
    """One typed line (with or without its leading ``:``) as an ``Order``, or why not."""
    if len(text) > MAX_LINE:
        return Refused(f"command too long ({len(text)} characters, at most {MAX_LINE})")
    try:
        words = shlex.split(text.strip().removeprefix(":"))
    except ValueError as exc:
        return Refused(f"cannot read the command: {exc}")
    if not words:
        return Refused("no command: type one, e.g. :queue (Tab completes, :help lists them)")
    name, rest = words[0].lower(), words[1:]
    verb = _BY_NAME.get(name)
    if verb is None:
        near = difflib.get_close_matches(name, [v.name for v in VERBS], n=1, cutoff=0.6)
        hint = f"; did you mean :{near[0]}?" if near else ""
        return Refused(f"unknown command :{clean(words[0], 40)}{hint} (:help lists them)")
    if verb.name == "claim":
        return _claim(rest)
    if verb.name == "sort":
        return _choice("sort", rest, sort_keys, required=True)
    if verb.name == "theme":
        return _choice("theme", rest, themes, required=False)
    if verb.name == "filter":
        return Order("filter", clean(" ".join(rest), MAX_TEXT))
    if rest:
        return Refused(f":{verb.name} takes nothing (given: {clean(' '.join(rest), 40)})")
    return Order(verb.name)


def _choice(
    verb: str, rest: list[str], choices: Sequence[str], *, required: bool
) -> Order | Refused:
    listed = ", ".join(choices)
    if not rest:
        return Refused(f":{verb} needs one of: {listed}") if required else Order(verb)
    if len(rest) > 1 or rest[0] not in choices:
        return Refused(f":{verb} {clean(' '.join(rest), 40)}: not one of {listed}")
    return Order(verb, rest[0])


def _claim(rest: list[str]) -> Order | Refused:
    """``:claim`` read by ``gputui claim``'s own parser: its flags, types and ranges."""
    if any(word in ("-h", "--help") for word in rest):
        return Refused(
            "claim: [GPU ...] [-g N] [--pool P] [--model M] [--host H] [--for 2h] "
            "[--note TEXT] [--project P] [--no-wait]"
        )
    if rest and rest[0].isdigit():  # ``:claim 2``: a count, as -g 2 (a GPU is HOST:INDEX)
        rest = ["-g", *rest]
    try:
        args = claim_parser().parse_args(rest)
    except (_Bad, argparse.ArgumentError) as exc:
        return Refused(clean(f"claim: {exc}", 200))
    return _claim_request(args)


def _claim_request(a: argparse.Namespace) -> Order | Refused:
    if a.json:
        return Refused("claim: --json is for the command line, not the console")
    if a.gpus is not None and a.gpu:
        return Refused("claim: name GPUs or give -g N, not both")
    if a.duration is not None and not 0 < a.duration <= MAX_CLAIM_S:
        return Refused(f"claim: --for at most {int(MAX_CLAIM_S // 86_400)} days")
    texts = {"pool": a.pool, "model": a.model, "host": a.host, "project": a.project}
    for label, value in (*texts.items(), ("note", a.note)):
        if value is not None and (len(value) > MAX_TEXT or clean(value, MAX_TEXT) != value):
            return Refused(f"claim: --{label} must be printable, at most {MAX_TEXT} characters")
    if len(a.gpu) > 64 or any(len(ref) > 128 or clean(ref, 128) != ref for ref in a.gpu):
        return Refused("claim: GPUs are HOST:INDEX or uuids, at most 64 of them")
    request: dict[str, Any] = {"note": a.note, "wait": not a.no_wait}
    if a.gpu:
        request["gpu_refs"] = list(a.gpu)
    else:
        request["gpus"] = a.gpus if a.gpus is not None else 1
    request |= {key: value for key, value in texts.items() if value}
    if a.duration is not None:
        request["duration_s"] = a.duration
    return Order("claim", claim=request)


def completions(text: str, sort_keys: Sequence[str], themes: Sequence[str]) -> list[str]:
    """Whole lines that ``text`` may be the start of: a command's name, or a sort key
    or theme after ``sort``/``theme``; the shortest first."""
    stripped = text.lstrip().removeprefix(":")
    head, space, tail = stripped.partition(" ")
    if not space:
        names = [name for verb in VERBS for name in (verb.name, *verb.aliases)]
        found = [n for n in names if n.startswith(head.lower()) and len(n) > 1]
        return sorted(dict.fromkeys(found), key=lambda n: (len(n), n))
    choices = {"sort": sort_keys, "theme": themes}.get(head.lower(), ())
    if " " in tail.strip():
        return []
    return [f"{head} {c}" for c in choices if c.startswith(tail.strip())]


def complete(text: str, sort_keys: Sequence[str], themes: Sequence[str]) -> str | None:
    """``text`` completed as far as it is unambiguous (None: nothing to add)."""
    found = completions(text, sort_keys, themes)
    if not found:
        return None
    common = found[0]
    for other in found[1:]:
        while not other.startswith(common):
            common = common[:-1]
    stripped = text.lstrip().removeprefix(":")
    if len(found) == 1 and " " not in common and common in _TAKES:
        common += " "
    return common if len(common) > len(stripped) else None


_TAKES = {verb.name for verb in VERBS if verb.takes}
