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
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from gputui.common.argtypes import gpu_count
from gputui.common.durations import parse_duration
from gputui.common.i18n import N_, _
from gputui.common.mig_profile import mig_arg
from gputui.common.text import clean

MAX_LINE = 500
"""Longest command line read (a longer one is refused, not cut)."""
MAX_CLAIM_S = 366 * 86_400.0
"""Longest ``--for`` a claim may ask (the CLI's parser has no upper bound)."""
MAX_TEXT = 200
"""Longest pool, model, host, project or note."""


class _Bad(Exception):
    """An argument ``claim_parser`` refuses; its message is the one line said."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Bad(message)


def claim_parser() -> argparse.ArgumentParser:
    """``gputui claim``'s arguments, read without printing or exiting."""
    c = _Parser(prog="claim", add_help=False, exit_on_error=False)
    c.add_argument("gpu", nargs="*")
    c.add_argument("-g", "--gpus", type=gpu_count)
    c.add_argument("--pool")
    c.add_argument("--model")
    c.add_argument("--mig", type=mig_arg)
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
    Verb("queue", N_("The job queue, logs and actions"), ("jobs",)),
    Verb("usage", N_("GPU-hours per user and group, utilisation by hour")),
    Verb("health", N_("Every problem in the cluster, ranked")),
    Verb("audit", N_("Who did what, when and why")),
    Verb("claim", N_("Claim GPUs, as gputui claim: :claim 2 --pool a100"), takes="[ARGS]"),
    Verb("release", N_("Release your claim on the selected GPU (host line: all there)")),
    Verb("submit", N_("Enqueue a job (a form)")),
    Verb("env", N_("Copy the CUDA_VISIBLE_DEVICES line for the selected host")),
    Verb("drain", N_("Drain or undrain the selected GPU or host (admins; asks why)")),
    Verb("force-free", N_("Take the selected GPU back (admins; asks why)")),
    Verb("sort", N_("Sort the GPUs by KEY"), takes="KEY"),
    Verb("filter", N_("Filter the GPUs by host, pool, model or user"), takes="[TEXT]"),
    Verb("group", N_("Group by host, or one list across all hosts")),
    Verb("tree", N_("The processes as a tree per GPU (parents, container), or flat")),
    Verb("retry", N_("Reconnect the selected host now")),
    Verb("theme", N_("Next theme, or the one named"), takes="[NAME]"),
    Verb("help", N_("Every key and command"), ("h", "?")),
    Verb("quit", N_("Quit gputui"), ("q", "q!", "exit")),
)
"""Every command of the ``:`` line and the palette, in the order the palette lists them
(``help`` is marked for the catalogue: where it is shown, ``_(verb.help)``)."""

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
        return Refused(
            _("command too long ({length} characters, at most {most})").format(
                length=len(text), most=MAX_LINE
            )
        )
    try:
        words = shlex.split(text.strip().removeprefix(":"))
    except ValueError as exc:
        if "quotation" in str(exc):
            return Refused(_("cannot read the command: a quote is not closed"))
        if "escaped" in str(exc):
            return Refused(_("cannot read the command: it ends in a lone backslash"))
        return Refused(_("cannot read the command: {error}").format(error=exc))
    if not words:
        return Refused(_("no command: type one, e.g. :queue (Tab completes, :help lists them)"))
    name, rest = words[0].lower(), words[1:]
    verb = _BY_NAME.get(name)
    if verb is None:
        near = difflib.get_close_matches(name, [v.name for v in VERBS], n=1, cutoff=0.6)
        typed = clean(words[0], 40)
        if near:
            said = _("unknown command :{typed}; did you mean :{near}? (:help lists them)")
            return Refused(said.format(typed=typed, near=near[0]))
        return Refused(_("unknown command :{typed} (:help lists them)").format(typed=typed))
    if verb.name == "claim":
        return _claim(rest)
    if verb.name == "sort":
        return _choice("sort", rest, sort_keys, required=True)
    if verb.name == "theme":
        return _choice("theme", rest, themes, required=False)
    if verb.name == "filter":
        return Order("filter", clean(" ".join(rest), MAX_TEXT))
    if rest:
        said = _(":{verb} takes nothing (given: {given})")
        return Refused(said.format(verb=verb.name, given=clean(" ".join(rest), 40)))
    return Order(verb.name)


def _choice(
    verb: str, rest: list[str], choices: Sequence[str], *, required: bool
) -> Order | Refused:
    listed = ", ".join(choices)
    if not rest:
        if required:
            return Refused(_(":{verb} needs one of: {choices}").format(verb=verb, choices=listed))
        return Order(verb)
    if len(rest) > 1 or rest[0] not in choices:
        said = _(":{verb} {given}: not one of {choices}")
        return Refused(said.format(verb=verb, given=clean(" ".join(rest), 40), choices=listed))
    return Order(verb, rest[0])


def _claim(rest: list[str]) -> Order | Refused:
    """``:claim`` read by ``gputui claim``'s own parser: its flags, types and ranges."""
    if any(word in ("-h", "--help") for word in rest):
        return Refused(
            _(
                "claim: [GPU ...] [-g N] [--pool P] [--model M] [--mig PROFILE] [--host H] "
                "[--for 2h] [--note TEXT] [--project P] [--no-wait]"
            )
        )
    if rest and _COUNT.fullmatch(rest[0]):  # ``:claim 2``: a count, as -g 2 (a GPU is
        rest = ["-g", *rest]  # HOST:INDEX; ``-5`` is a count out of range, not a GPU)
    try:
        args = claim_parser().parse_args(rest)
    except (_Bad, argparse.ArgumentError) as exc:
        return Refused(clean(_argparse_line(str(exc)), 200))
    return _claim_request(args)


_COUNT = re.compile(r"[-+]?[0-9]+")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)", re.DOTALL)
_NO_VALUE = re.compile(r"argument (\S+): expected one argument")
_INVALID = re.compile(r"argument (\S+): invalid (\S+) value: (.*)", re.DOTALL)
_BAD_VALUE = re.compile(r"argument (\S+): (.*)", re.DOTALL)


def _argparse_line(message: str) -> str:
    """What ``claim_parser`` refused, as the one line said: argparse's own words are
    English whatever the language, so its usual ones are said here (in English as
    argparse says them); a type's own message (``not a duration: …``) is looked up."""
    if found := _UNRECOGNIZED.fullmatch(message):
        return _("claim: unrecognized arguments: {args}").format(args=found.group(1))
    if found := _NO_VALUE.fullmatch(message):
        return _("claim: argument {flag}: expected one argument").format(flag=found.group(1))
    if found := _INVALID.fullmatch(message):
        return _("claim: argument {flag}: invalid {type} value: {value}").format(
            flag=found.group(1), type=found.group(2), value=found.group(3)
        )
    if found := _BAD_VALUE.fullmatch(message):
        return _("claim: argument {flag}: {why}").format(flag=found.group(1), why=_(found.group(2)))
    return _("claim: {error}").format(error=message)


def _claim_request(a: argparse.Namespace) -> Order | Refused:
    if a.json:
        return Refused(_("claim: --json is for the command line, not the console"))
    if a.gpus is not None and a.gpu:
        return Refused(_("claim: name GPUs or give -g N, not both"))
    if a.duration is not None and not 0 < a.duration <= MAX_CLAIM_S:
        days = int(MAX_CLAIM_S // 86_400)
        return Refused(_("claim: --for at most {days} days").format(days=days))
    texts = {"pool": a.pool, "model": a.model, "host": a.host, "project": a.project}
    for label, value in (*texts.items(), ("note", a.note)):
        if value is not None and (len(value) > MAX_TEXT or clean(value, MAX_TEXT) != value):
            said = _("claim: --{flag} must be printable, at most {most} characters")
            return Refused(said.format(flag=label, most=MAX_TEXT))
    if len(a.gpu) > 64 or any(len(ref) > 128 or clean(ref, 128) != ref for ref in a.gpu):
        return Refused(_("claim: GPUs are HOST:INDEX or uuids, at most 64 of them"))
    request: dict[str, Any] = {"note": a.note, "wait": not a.no_wait}
    if a.gpu:
        request["gpu_refs"] = list(a.gpu)
    else:
        request["gpus"] = a.gpus if a.gpus is not None else 1
    request |= {key: value for key, value in texts.items() if value}
    if a.duration is not None:
        request["duration_s"] = a.duration
    if a.mig is not None:
        request["mig"] = a.mig
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
