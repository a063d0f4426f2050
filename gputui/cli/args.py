"""The command line of the scheduler's verbs (``gputui claim``, ``submit``, ``queue``, …).

Argument types check what they can before a request is sent: a job id, a GPU
count within the head's limit, a duration, a ``HOST:GPU``. ``VERBS`` says, for each
verb, which module runs it and what it asks of the scheduler (checked before any
request: a backend that lacks one says so, and nothing is half done).

Stdlib only at import: ``gputui.entry`` reads ``VERBS`` on every call, and
``--help`` is printed from here without loading any verb's module. ``parser(verb)``
builds the one verb's parser a call runs (``only_verb`` says which, when one may
stand for all): its argument types are imported as it is built, not before.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from gputui.common.argtypes import gpu_count, job_id
from gputui.common.durations import parse_duration
from gputui.common.i18n import N_, _
from gputui.common.mig_profile import mig_arg
from gputui.common.printable import shown

if TYPE_CHECKING:
    from gputui.scheduler.client.errors import HeadError

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
"""The verbs' exit statuses: done; refused (or a capability the scheduler lacks); bad
usage; the scheduler cannot be reached."""


class Verb(NamedTuple):
    """Which module of ``gputui.cli`` runs a verb, and the backend's capabilities
    (``scheduler.client.backend.CAPABILITIES``) it uses."""

    module: str
    needs: tuple[str, ...]


_ACT = ("cancel", "kill", "preempt", "requeue", "hold", "release-hold")
VERBS: dict[str, Verb] = {
    "claim": Verb("claims", ("claim",)),
    "release": Verb("claims", ("release",)),
    "claims": Verb("claims", ("claims",)),
    "env": Verb("claims", ("env",)),
    "book": Verb("bookings", ("book",)),
    "unbook": Verb("bookings", ("unbook",)),
    "bookings": Verb("bookings", ("bookings",)),
    "run": Verb("run", ("hold_claim", "resume_claim", "subscribe", "release")),
    "attach": Verb("attach", ("attach",)),
    "submit": Verb("jobs", ("submit",)),
    "queue": Verb("jobs", ("queue",)),
    "show": Verb("jobs", ("show",)),
    **{name: Verb("jobs", (name.replace("-", "_"),)) for name in _ACT},
    "logs": Verb("jobs", ("logs",)),
    "wait": Verb("jobs", ("wait",)),
    "audit": Verb("records", ("audit",)),
    "whoami": Verb("records", ("whoami",)),
    "notices": Verb("records", ("notices",)),
    "notify": Verb("notify", ("notify_set", "notify_clear", "notify_show", "notify_test")),
    "explain": Verb("policy", ("explain",)),
    "quota": Verb("policy", ("quota",)),
    "usage": Verb("usage", ("usage",)),
    "report": Verb("usage", ("report",)),
    "history": Verb("history", ("history",)),
    "drain": Verb("drain", ("drain",)),
    "undrain": Verb("drain", ("undrain",)),
    "unfence": Verb("drain", ("unfence",)),
    "force-free": Verb("forcefree", ("force_free",)),
    "gpus": Verb("gpus", ("gpus",)),
}
"""Every scheduler verb (``gputui.entry`` sends these to ``gputui.cli.verbs``)."""


HELP_WIDTH = 80
"""The width the hand-laid help blocks (how the head is found, the verbs) are wrapped to."""

_HEAD_TITLE = N_("finding the head (the first that applies):")
_HEAD_STEPS = (
    ("1.", "--socket PATH", N_("the head's Unix socket on this machine")),
    ("2.", "$GPUTUI_HEAD_SOCKET", N_("e.g. export GPUTUI_HEAD_SOCKET=/run/gputui/head.sock")),
    (
        "3.",
        N_("hosts.yaml's head: section"),
        N_(
            "its socket: here, or over SSH to its host: when that is another machine;"
            " hosts.yaml is --hosts FILE, else $GPUTUI_HOSTS, ./hosts.yaml,"
            " ~/.config/gputui/hosts.yaml, /etc/gputui/hosts.yaml"
        ),
    ),
    ("4.", "/run/gputui/head.sock", N_("the installed head's socket")),
)
_HEAD_NOTE = N_(
    "A hosts.yaml named by --hosts or $GPUTUI_HOSTS must exist, even with --socket"
    " (exit 2 otherwise)."
)
VERB_EPILOG_NOTE = N_("(give --socket and --hosts before the verb)")


def _cells(text: str) -> int:
    """Terminal cells ``text`` takes: wide (East Asian) characters count two."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(
        0 if combining(ch) else 2 if east_asian_width(ch) in ("W", "F") else 1 for ch in text
    )


_WIDE = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
_CLOSING = "\uff0c\u3002\uff1b\uff1a\u3001\uff09\u300d\u300f\u300b\uff01\uff1f"
"""Marks a line never starts with: full-width comma, full stop, semicolon, colon..."""
_OPENING = "\uff08\u300c\u300e\u300a"
"""Marks a line never ends with: full-width opening bracket and quotes."""


@functools.cache
def token() -> re.Pattern[str]:
    """What ``wrap_cells`` breaks text into: a run of spaces, one Chinese character or
    one word, with the marks that stay with it (compiled when first wrapped: 2 ms)."""
    return re.compile(rf"\s+|[{_OPENING}]*(?:[{_WIDE}]|[^\s{_WIDE}]+)[{_CLOSING}]*")


def _token_of(text: str) -> list[str]:
    return list(token().findall(" ".join(text.split())))


def wrap_cells(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells (a word longer than that alone on
    its line): between words, and between any two Chinese characters, never before
    a closing mark (a comma, a full stop, a closing bracket) nor after an opening one."""
    width = max(8, width)
    lines: list[str] = []
    line, used, space = "", 0, False
    for token in _token_of(text):
        if token.isspace():
            space = True
            continue
        gap = " " if space and line else ""
        size = _cells(token)
        if line and used + len(gap) + size > width:
            lines.append(line)
            line, used, gap = "", 0, ""
        line += gap + token
        used += len(gap) + size
        space = False
    if line or not lines:
        lines.append(line)
    return lines


def hanging(term: str, text: str, column: int, indent: int = 2) -> list[str]:
    """``term`` at ``indent``, ``text`` wrapped in the column from ``column`` on (on
    the next line when the term reaches it): a block of the help laid out by hand."""
    lead = " " * indent + term
    room = HELP_WIDTH - column
    body = wrap_cells(text, room)
    if _cells(lead) + 1 > column:
        return [lead, *(" " * column + line for line in body)]
    first = lead + " " * (column - _cells(lead)) + body[0]
    return [first, *(" " * column + line for line in body[1:])]


def finding_the_head(say: Callable[[str], str] = _) -> str:
    """How every scheduler verb (and ``gputui health``) finds the head, in the
    language ``say`` looks words up in: the ``--help`` epilog of the verbs and of
    ``gputui`` itself."""
    lines = [say(_HEAD_TITLE)]
    for number, term, text in _HEAD_STEPS:
        lines += hanging(f"{number} {say(term)}", say(text), 34)
    lines += ["  " + line for line in wrap_cells(say(_HEAD_NOTE), HELP_WIDTH - 2)]
    return "\n".join(lines) + "\n"


# -- argparse, in the language chosen ------------------------------------------------

JOB_OPTION_WORDS = (
    N_("how many GPUs (default 1)"),
    N_("MIG slices of this profile (1g.10gb)"),
    N_("working directory on the host (default: this one)"),
    N_("time limit (30m, 2h, 1-00:00)"),
    N_("priority class (urgent, normal, low, night by default)"),
    N_("tag the job for accounting"),
    N_("start after these ended"),
    N_("start after these completed; cancelled if one did not"),
    N_("set a variable for the job (again for more)"),
    N_("what the job takes from this environment (default NONE)"),
    N_("activate this conda environment (name or path)"),
    N_("activate this virtual environment"),
    N_("run the command in a container of this image"),
    N_("container runtime for --image (default: the head's jobs.runtime)"),
    N_("a job array: 0-31%%4 (at most 4 at once), 1,3,5, 0-99:10"),
    N_("output file on the host: %%j job id, %%A array id, %%a task id"),
)
"""The help of ``jobscript.add_job_options`` (``gputui submit``'s job options), for
the catalogue: ``Words`` looks each up as it is shown (a test holds these to it)."""

ARGPARSE_WORDS = (
    N_("show this help message and exit"),
    N_("show program's version number and exit"),
    N_("positional arguments"),
    N_("options"),
)
"""argparse's own words a help shows (its ``-h``, ``--version``, the sections)."""

_P = r"(?P<{}>.*?)"
_ARGPARSE_SAID: tuple[tuple[str, str], ...] = (
    (r"argument {name}: {message}", N_("argument {name}: {message}")),
    (r"the following arguments are required: {names}",
     N_("the following arguments are required: {names}")),
    (r"unrecognized arguments: {args}", N_("unrecognized arguments: {args}")),
    (r"invalid choice: {value} \(choose from {choices}\)",
     N_("invalid choice: {value} (choose from {choices})")),
    (r"invalid {type} value: {value}", N_("invalid {type} value: {value}")),
    (r"expected one argument", N_("expected one argument")),
    (r"expected at most one argument", N_("expected at most one argument")),
    (r"expected at least one argument", N_("expected at least one argument")),
    (r"expected {n} arguments?", N_("expected {n} arguments")),
    (r"not allowed with argument {name}", N_("not allowed with argument {name}")),
    (r"one of the arguments {names} is required", N_("one of the arguments {names} is required")),
    (r"ambiguous option: {option} could match {matches}",
     N_("ambiguous option: {option} could match {matches}")),
    (r"ignored explicit argument {value}", N_("ignored explicit argument {value}")),
    # The argument types of gputui.common that say theirs in English (the others,
    # GPU counts, job ids and durations, say theirs in the chosen language already):
    (r"not a MIG profile: {text} \(e\.g\. 1g\.10gb, 2g\.20gb, 3g\.40gb\)",
     N_("not a MIG profile: {text} (e.g. 1g.10gb, 2g.20gb, 3g.40gb)")),
    (r"not a file name pattern: {text}", N_("not a file name pattern: {text}")),
)  # fmt: skip
"""argparse's messages (as its English says them), and those of the argument types
``gputui.common`` gives it, with ours for them."""


@functools.cache
def _said_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """``_ARGPARSE_SAID`` compiled: on the first usage error, not on every call."""
    return tuple(
        (re.compile(pattern.format_map({k: _P.format(k) for k in re.findall(r"{(\w+)}", pattern)})
                    + r"\Z", re.S), template)
        for pattern, template in _ARGPARSE_SAID
    )  # fmt: skip


def argparse_said(message: str) -> str:
    """argparse's ``message`` in the language chosen (an argument's own message,
    after ``argument X:``, too); one of ours is already in it."""
    for pattern, template in _said_patterns():
        found = pattern.match(message)
        if found is not None:
            fields = found.groupdict()
            if "message" in fields:
                fields["message"] = argparse_said(fields["message"])
            return _(template).format(**fields)
    return message


class Words(argparse.HelpFormatter):
    """A help whose words are looked up as it is laid out (the options' help, the
    sections' titles, ``usage:``) and wrapped by display cells (a Chinese
    character takes two)."""

    def add_usage(
        self,
        usage: str | None,
        actions: Any,
        groups: Any,
        prefix: str | None = None,
    ) -> None:
        super().add_usage(usage, actions, groups, _("usage:") + " " if prefix is None else prefix)

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any) -> str:
        # argparse lines the usage up by characters: a prefix of wide ones (用法)
        # takes more cells than that, so the lines after the first move over by the rest.
        extra = _cells(prefix) - len(prefix) if isinstance(prefix, str) else 0
        if extra <= 0:
            return str(super()._format_usage(usage, actions, groups, prefix))
        self._width -= extra
        try:
            text = str(super()._format_usage(usage, actions, groups, prefix))
        finally:
            self._width += extra
        first, *rest = text.split("\n")
        return "\n".join([first, *(" " * extra + line if line.strip() else line for line in rest)])

    def start_section(self, heading: str | None) -> None:
        super().start_section(_(heading) if heading else heading)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return _(action.help) if action.help else action.help

    def _split_lines(self, text: str, width: int) -> list[str]:
        if text.isascii():
            return super()._split_lines(text, width)
        return wrap_cells(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.isascii():
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in wrap_cells(text, width - len(indent)))


class RawWords(Words):
    """``Words`` with the description and epilog as they are laid out by hand."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that speaks the language chosen: its help (description,
    options, ``epilog_of``) and its usage errors, argparse's own words too, are
    looked up when they are shown, never when it is built; its verbs' parsers are
    ``Parser``\\ s too."""

    epilog_of: Callable[[], str] | None = None
    """The epilog, made in the language chosen when the help is shown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Words)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        saved = self.description, self.epilog
        if self.description:
            self.description = _(self.description)
        if self.epilog_of is not None:
            self.epilog = self.epilog_of()
        try:
            return super().format_help()
        finally:
            self.description, self.epilog = saved

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        said = _("{prog}: error: {message}").format(prog=self.prog, message=argparse_said(message))
        self.exit(2, said + "\n")


def verbs_of(parser: argparse.ArgumentParser) -> Sequence[argparse.ArgumentParser]:
    """The parsers of ``parser``'s verbs (none when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.values())
    return []


_job_id = job_id


def _job_ref(text: str) -> str:
    """A job, or one task of an array (``12_7``): checked, sent as given."""
    from gputui.common.arrays import task_ref

    if task_ref(text) is None:
        raise argparse.ArgumentTypeError(
            _("not a job id (or ARRAY_TASK, e.g. 12_7): {text}").format(text=repr(text[:40]))
        )
    job_id(text.split("_", 1)[0])
    return text.strip()


LANG_HELP = N_(
    "language shown: en or zh_CN (else hosts.yaml's ui.lang, else LC_ALL, LC_MESSAGES,"
    " LANG); --json, --csv and reason codes are the same in every language"
)


def _booking_said(text: str) -> str:
    return _("not a booking id: {text}").format(text=repr(text[:40]))


def _booking_id(text: str) -> int:
    try:
        value = int(text.removeprefix("b"))
    except ValueError:
        raise argparse.ArgumentTypeError(_booking_said(text)) from None
    if not 1 <= value <= 2**53:
        raise argparse.ArgumentTypeError(_booking_said(text))
    return value


def only_verb(argv: Sequence[str]) -> str | None:
    """The verb of ``argv`` when its parser alone parses ``argv`` as every verb's would:
    a known verb after nothing but ``--hosts``, ``--socket`` and ``--lang`` with their
    values. None (build them all) for anything else before it: ``-h`` lists every
    verb, and an abbreviation or a mistake is answered as it always was."""
    items = iter(argv)
    for item in items:
        if item in ("--hosts", "--socket", "--lang"):
            if next(items, None) is None:
                return None
        elif item.startswith(("--hosts=", "--socket=", "--lang=")):
            continue
        else:
            return item if item in VERBS else None
    return None


def parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The verbs' command line: every verb's parser, or only ``verb``'s (``only_verb``:
    the usage, the help and the errors of that verb read the same either way)."""
    p = Parser(prog="gputui", add_help=True, formatter_class=RawWords)
    p.epilog_of = finding_the_head
    p.add_argument(
        "--hosts",
        metavar="FILE",
        help=N_("hosts.yaml (for head.socket; else the console's search, trusted files only)"),
    )
    p.add_argument(
        "--socket",
        metavar="PATH",
        help=N_("the head's socket (else $GPUTUI_HEAD_SOCKET, hosts.yaml's head:, the default)"),
    )
    p.add_argument("--lang", metavar="LANG", help=LANG_HELP)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    _verb_parsers(sub, lambda name: verb is None or name == verb)
    for each in sub.choices.values():  # every verb's --help says how the head is found
        each.formatter_class = RawWords
        if isinstance(each, Parser):
            each.epilog_of = _verb_epilog
    return p


def _verb_epilog() -> str:
    return finding_the_head() + "  " + _(VERB_EPILOG_NOTE) + "\n"


_LISTS = {"claims": N_("list claims"), "queue": N_("list the queue, then flagged processes")}
_ACTS = {
    "cancel": N_("cancel jobs"),
    "kill": N_("kill jobs"),
    "preempt": N_("preempt jobs"),
    "requeue": N_("requeue jobs"),
    "hold": N_("hold jobs"),
    "release-hold": N_("release-hold jobs"),
}


def _verb_parsers(sub: Any, want: Callable[[str], bool]) -> None:
    if want("claim"):
        c = sub.add_parser("claim", help=N_("claim GPUs: by name (HOST:INDEX or uuid) or -g N"))
        c.add_argument("gpu", nargs="*", help=N_("GPUs to claim (HOST:INDEX or uuid)"))
        c.add_argument("-g", "--gpus", type=gpu_count, help=N_("how many free GPUs"))
        c.add_argument("--pool")
        c.add_argument("--model", help=N_("GPU model, e.g. a100"))
        c.add_argument(
            "--mig",
            type=mig_arg,
            metavar="PROFILE",
            help=N_("MIG slices of this profile (1g.10gb)"),
        )
        c.add_argument("--host")
        c.add_argument(
            "--for", dest="duration", type=parse_duration, help=N_("release after (2h, 1d)")
        )
        c.add_argument("--note", default="")
        c.add_argument("--project", help=N_("tag the claim for accounting"))
        c.add_argument("--no-wait", action="store_true", help=N_("refuse rather than queue"))
        c.add_argument("--json", action="store_true")
    if want("release"):
        r = sub.add_parser("release", help=N_("release claimed GPUs"))
        r.add_argument("gpu", nargs="*", help=N_("GPUs (HOST:INDEX or uuid) or claim ids (c12)"))
        r.add_argument("--all", action="store_true")
        r.add_argument("--reason")
    for name in filter(want, ("claims", "queue")):
        q = sub.add_parser(name, help=_LISTS[name])
        q.add_argument("--all", action="store_true", help=N_("finished ones too"))
        q.add_argument("--user", help=N_("only this user's (a name no account has: exit 2)"))
        q.add_argument("--json", action="store_true")
        if name == "queue":
            q.add_argument(
                "-o",
                "--format",
                metavar="FORMAT",
                help=N_(
                    "squeue's field letters: %%i id, %%j name, %%u user, %%T state, %%t its"
                    " code, %%M time used, %%l time limit, %%D or %%b GPUs, %%R reason or host,"
                    " %%P pool, %%Q priority, %%V submitted, %%S started, %%h host wanted;"
                    " %%.10j right-aligns in 10 columns, %%10j pads (both cut what is longer)"
                ),
            )
    if want("book"):
        b = sub.add_parser(
            "book",
            help=N_('book GPUs ahead: gputui book -g 4 --pool a100 --from "mon 09:00" --for 2d'),
        )
        b.add_argument("gpu", nargs="*", help=N_("GPUs to book (HOST:INDEX or uuid)"))
        b.add_argument("-g", "--gpus", type=gpu_count, help=N_("how many GPUs"))
        b.add_argument("--pool")
        b.add_argument("--model", help=N_("GPU model, e.g. a100"))
        b.add_argument("--host")
        b.add_argument(
            "--from",
            dest="start",
            default="now",
            help=N_(
                "start, local time: now, 14:00, mon 09:00, tomorrow 09:00, 2026-03-02 09:00, +2h"
            ),
        )
        b.add_argument("--for", dest="duration", type=parse_duration, required=True,
                       help=N_("how long (2h, 2d, 1-12:00)"))  # fmt: skip
        b.add_argument("--note", default="")
        b.add_argument(
            "--maint", action="store_true", help=N_("a maintenance window: drains (admins)")
        )
        b.add_argument("--reason", help=N_("why (an admin's maintenance booking, for the audit)"))
        b.add_argument("--json", action="store_true")
    if want("unbook"):
        ub = sub.add_parser("unbook", help=N_("cancel a booking"))
        ub.add_argument("booking", type=_booking_id, help=N_("its id (gputui bookings)"))
        ub.add_argument("--reason", help=N_("why (an admin cancelling another's booking)"))
    if want("bookings"):
        bs = sub.add_parser("bookings", help=N_("list bookings not yet over (the booking board)"))
        bs.add_argument("--all", action="store_true", help=N_("ended and cancelled ones too"))
        bs.add_argument("--json", action="store_true")
    if want("env"):
        e = sub.add_parser(
            "env", help=N_("print export CUDA_VISIBLE_DEVICES=... for your claims here")
        )
        e.add_argument("--host", help=N_("host (default: this machine's name)"))
    if want("submit"):
        s = sub.add_parser(
            "submit",
            help=N_(
                "queue a job: gputui submit -g 2 -- python train.py, or gputui submit train.sh"
            ),
            description=(
                N_(
                    "Queue a command (after --), or a script: gputui submit train.sh [ARGS]."
                    " A script's #GPUTUI lines (and the #SBATCH options that map: --gres=gpu:N,"
                    " --gpus, --time, --job-name, --array, --dependency, --output) set options;"
                    " flags given here override them. The script is copied now: a later edit"
                    " does not change the queued job."
                )
            ),
        )
        from gputui.common.jobscript import add_job_options  # dataclasses, the job's env

        add_job_options(s)
        s.add_argument(
            "--booking", type=_booking_id, metavar="ID", help=N_("run on this booking's GPUs")
        )
        s.add_argument("--json", action="store_true")
        s.add_argument("command", nargs=argparse.REMAINDER)
    if want("run"):
        run = sub.add_parser("run", help=N_("wait for GPUs here, run CMD with them, release after"))
        run.add_argument("-g", "--gpus", type=gpu_count, default=1)
        run.add_argument("--pool")
        run.add_argument(
            "--host",
            help=N_("host name in hosts.yaml (default: this machine's; with --pty, any host)"),
        )
        run.add_argument(
            "--pty",
            action="store_true",
            help=N_(
                "an interactive job: CMD runs on a GPU host on a terminal kept there, and this"
                " one is attached to it (Ctrl-] d detaches; gputui attach JOB comes back)"
            ),
        )
        run.add_argument(
            "--time",
            type=parse_duration,
            help=N_("with --pty: time limit (at most, and by default, jobs.interactive_time)"),
        )
        run.add_argument("command", nargs=argparse.REMAINDER)
    if want("attach"):
        at = sub.add_parser(
            "attach",
            help=N_("a terminal on an interactive job (gputui run --pty): Ctrl-] d detaches"),
        )
        at.add_argument("job", type=_job_id)
    if want("show"):
        sh = sub.add_parser("show", help=N_("everything about one job"))
        sh.add_argument("job", type=_job_id)
        sh.add_argument("--json", action="store_true")
    for name in filter(want, ("cancel", "kill", "preempt", "requeue", "hold", "release-hold")):
        a = sub.add_parser(name, help=_ACTS[name])
        if name == "cancel":
            a.add_argument(
                "job",
                type=_job_ref,
                nargs="+",
                metavar="JOB",
                help=N_("a job; an array's id: all of it not ended; ARRAY_TASK (12_7): one task"),
            )
        else:
            a.add_argument("job", type=_job_id, nargs="+")
        a.add_argument("--reason", help=N_("required for an admin acting on another's job"))
        if name == "requeue":
            a.add_argument(
                "--force",
                action="store_true",
                help=N_("requeue a job that ended: its owner's command runs again, as its owner"),
            )
    if want("logs"):
        lg = sub.add_parser("logs", help=N_("a job's output"))
        lg.add_argument("job", type=_job_id)
        lg.add_argument(
            "-f",
            "--follow",
            action="store_true",
            help=N_(
                "keep reading as it grows; a requeued job's new run is shown from its start, "
                "after a line '--- job J: run N (requeued) ---'"
            ),
        )
    if want("wait"):
        w = sub.add_parser("wait", help=N_("wait for a job; exit with its exit code"))
        w.add_argument("job", type=_job_id)
    if want("audit"):
        au = sub.add_parser("audit", help=N_("admin actions"))
        au.add_argument("--since", help=N_("YYYY-MM-DD or epoch seconds"))
        au.add_argument("--json", action="store_true")
    if want("whoami"):
        me = sub.add_parser("whoami", help=N_("who the head thinks you are"))
        me.add_argument("--json", action="store_true")
    if want("notices"):
        no = sub.add_parser(
            "notices",
            help=N_("what the head told you (preemptions, ends, drains): unread, then read"),
        )
        no.add_argument("--all", action="store_true", help=N_("the newest 200, read or not"))
        no.add_argument("--json", action="store_true")
    _notify_parser(sub, want)
    _policy_parsers(sub, want)
    _usage_parsers(sub, want)
    _drain_parsers(sub, want)
    _force_free_parser(sub, want)
    _gpus_parser(sub, want)


def _gpus_parser(sub: Any, want: Callable[[str], bool]) -> None:
    if not want("gpus"):
        return
    g = sub.add_parser(
        "gpus",
        help=N_("every GPU: its state, holder, use, and why it is unavailable"),
        description=(
            N_(
                "Every GPU with its state (free, claimed, job, rogue, stray, drained, fenced,"
                " unhealthy), its holder (job or claim id and user, or the pid and user of"
                " a process nobody was given the card for), utilisation, memory used/total,"
                " and why it is unavailable. Free means unclaimed and idle: no job, no"
                " claim, no process on it. A free card with phantom memory, a rogue process"
                " or a health warning says so: placement uses it last."
            )
        ),
    )
    g.add_argument(
        "--free", action="store_true", help=N_("only the free ones (unclaimed and idle)")
    )
    g.add_argument("--pool", help=N_("only this pool's GPUs"))
    g.add_argument("--json", action="store_true", help=N_("every field, in full"))


def _policy_parsers(sub: Any, want: Callable[[str], bool]) -> None:
    if want("explain"):
        e = sub.add_parser(
            "explain", help=N_("why a job waits: its place, factors, start estimate")
        )
        e.add_argument("job", type=_job_id)
        e.add_argument("--json", action="store_true")
    if want("quota"):
        q = sub.add_parser("quota", help=N_("use against each weekly GPU-hour quota"))
        q.add_argument("--json", action="store_true")


def _usage_parsers(sub: Any, want: Callable[[str], bool]) -> None:
    if want("usage"):
        u = sub.add_parser(
            "usage", help=N_("GPU-hours, busy hours, energy and cost by user, group, …")
        )
        u.add_argument("--since", help=N_("YYYY-MM-DD (local) or 7d, 12h, 2w ago (default: 7d)"))
        u.add_argument("--until", help=N_("YYYY-MM-DD (that whole day) or 1d ago (default: now)"))
        u.add_argument("--by", default="user", help=N_("user (default), group, project or pool"))
        u.add_argument("--daily", action="store_true", help=N_("a row per day and key"))
        u.add_argument("--csv", action="store_true")
        u.add_argument("--json", action="store_true")
    if want("report"):
        r = sub.add_parser("report", help=N_("a weekly summary to paste into a chat"))
        r.add_argument("--week", action="store_true", help=N_("the last 7 days (the default)"))
        r.add_argument("--json", action="store_true")
    if want("history"):
        h = sub.add_parser(
            "history", help=N_("finished jobs: exit, GPU-hours, busy share, energy (like sacct)")
        )
        h.add_argument(
            "--user",
            help=N_("this user's (default: yours; another's: an admin, or private_data off)"),
        )
        h.add_argument(
            "-a", "--all-users", action="store_true", help=N_("everyone's (the same rule)")
        )
        h.add_argument(
            "--state",
            metavar="STATE[,STATE...]",
            help=N_("completed, failed, timeout, killed, cancelled (or Slurm's CD, F, TO, CA)"),
        )
        h.add_argument(
            "--since", help=N_("ended after: YYYY-MM-DD (local) or 7d, 12h, 2w ago (7d)")
        )
        h.add_argument(
            "--until", help=N_("ended before: YYYY-MM-DD (that whole day) or 1d ago (now)")
        )
        h.add_argument("--limit", metavar="N", help=N_("the newest N (default 100, at most 10000)"))
        h.add_argument("--json", action="store_true")


def _drain_parsers(sub: Any, want: Callable[[str], bool]) -> None:
    if want("drain"):
        d = sub.add_parser("drain", help=N_("no new jobs or claims on a host or GPU (admins)"))
        d.add_argument(
            "target", metavar="HOST[:GPU]", help=N_("a host, or one GPU by index or uuid")
        )
        d.add_argument("--reason", required=True, help=N_("why (kept in the audit log)"))
        d.add_argument("--json", action="store_true")
    if want("undrain"):
        u = sub.add_parser(
            "undrain", help=N_("take new work on a drained host or GPU again (admins)")
        )
        u.add_argument("target", metavar="HOST[:GPU]")
        u.add_argument("--reason", help=N_("why (kept in the audit log)"))
        u.add_argument("--json", action="store_true")
    if want("unfence"):
        f = sub.add_parser("unfence", help=N_("clear the head's automatic fence of a GPU (admins)"))
        f.add_argument("target", metavar="HOST:GPU")
        f.add_argument("--reason", required=True, help=N_("why (kept in the audit log)"))
        f.add_argument("--json", action="store_true")


_TARGET = re.compile(r"\A([^:\s]{1,128}):([0-9]{1,2}|(?:GPU|MIG)-[0-9A-Za-z/-]{1,92})\Z")


def target(text: str) -> tuple[str, str]:
    """``HOST:GPU`` (GPU: its index or uuid) -> (host, gpu); argparse's type."""
    match = _TARGET.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            _("not HOST:GPU (GPU: its index or uuid): {text}").format(text=repr(shown(text, 60)))
        )
    return match.group(1), match.group(2)


def _force_free_parser(sub: Any, want: Callable[[str], bool]) -> None:
    if not want("force-free"):
        return
    f = sub.add_parser(
        "force-free",
        help=N_("admins: take a stuck GPU back (drain, SIGTERM, SIGKILL, check its memory)"),
    )
    f.add_argument("gpu", type=target, metavar="HOST:GPU", help=N_("the GPU, by index or uuid"))
    f.add_argument("--reason", required=True, help=N_("why (audited; its owners are told)"))
    f.add_argument(
        "--reset",
        action="store_true",
        help=N_("reset the GPU if its memory stays held with no process (head.allow_gpu_reset)"),
    )
    f.add_argument("--json", action="store_true", help=N_("the final result as JSON"))


def said(exc: HeadError, verb: str) -> str:
    """The scheduler's refusal without its own ``op:`` prefix (the line already names
    the verb), in the user's language where the head sent its words (``HeadError.shown``)."""
    return exc.shown.removeprefix(f"{verb.replace('-', '_')}: ")


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (``submit``, ``run``); a usage error without one."""
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        from gputui.scheduler.client.errors import HeadError

        raise HeadError("usage", _("{verb}: give the command after --").format(verb=args.verb))
    return cmd


def _notify_parser(sub: Any, want: Callable[[str], bool]) -> None:
    if not want("notify"):
        return
    nf = sub.add_parser(
        "notify",
        help=N_("your notices in your chat too (Slack, Feishu/Lark, DingTalk, WeCom, email)"),
    )
    act = nf.add_subparsers(dest="action", required=True, metavar="ACTION")
    st = act.add_parser(
        "set", help=N_("send your notices to a channel (an apprise URL or a webhook)")
    )
    st.add_argument("url", help=N_("the channel's URL; - reads it from standard input"))
    st.add_argument(
        "--secret", help=N_("a Feishu/Lark or DingTalk bot's signing secret; - reads it from stdin")
    )
    st.add_argument(
        "--events", help=N_("which: start,end,fail,preempt,claim,fence,quota,idle,admin (all)")
    )
    st.add_argument("--name", default="default", help=N_("the channel's name (one per name)"))
    sh = act.add_parser("show", help=N_("your channels and the team's (their tokens masked)"))
    sh.add_argument("--json", action="store_true")
    te = act.add_parser("test", help=N_("send a test message to your channels now"))
    te.add_argument("--name", help=N_("only this channel"))
    cl = act.add_parser("clear", help=N_("stop sending to your channels"))
    cl.add_argument("--name", help=N_("only this channel"))
