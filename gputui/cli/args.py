"""The command line of the scheduler's verbs (``gputui claim``, ``submit``, ``queue``, …).

Argument types check what they can before a request is sent: a job id, a GPU
count within the head's limit, a duration, a ``HOST:GPU``. ``VERBS`` says, for each
verb, which module runs it and what it asks of the scheduler (checked before any
request: a backend that lacks one says so, and nothing is half done).

Stdlib only, besides the durations' parser: ``gputui.entry`` reads ``VERBS`` on
every call, and ``--help`` is printed from here without loading any verb's module.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, NamedTuple

from gputui.common.argtypes import gpu_count
from gputui.common.durations import parse_duration
from gputui.common.printable import shown
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
    "run": Verb("run", ("hold_claim", "resume_claim", "subscribe", "release")),
    "submit": Verb("jobs", ("submit",)),
    "queue": Verb("jobs", ("queue",)),
    "show": Verb("jobs", ("show",)),
    **{name: Verb("jobs", (name.replace("-", "_"),)) for name in _ACT},
    "logs": Verb("jobs", ("logs",)),
    "wait": Verb("jobs", ("wait",)),
    "audit": Verb("records", ("audit",)),
    "whoami": Verb("records", ("whoami",)),
    "notices": Verb("records", ("notices",)),
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


FINDING_THE_HEAD = """\
finding the head (the first that applies):
  1. --socket PATH                the head's Unix socket on this machine
  2. $GPUTUI_HEAD_SOCKET          e.g. export GPUTUI_HEAD_SOCKET=/run/gputui/head.sock
  3. hosts.yaml's head: section   its socket: here, or over SSH to its host: when
                                  that is another machine; hosts.yaml is --hosts FILE,
                                  else $GPUTUI_HOSTS, ./hosts.yaml,
                                  ~/.config/gputui/hosts.yaml, /etc/gputui/hosts.yaml
  4. /run/gputui/head.sock        the installed head's socket
  A hosts.yaml named by --hosts or $GPUTUI_HOSTS must exist, even with --socket
  (exit 2 otherwise).
"""
"""How every scheduler verb (and ``gputui health``) finds the head: the ``--help``
epilog of the verbs and of ``gputui`` itself."""


def _job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}")
    return value


def _job_ids(text: str) -> list[int]:
    """``12,13`` (Slurm's ``afterok:12:13`` style, with commas or colons)."""
    parts = [p for p in text.replace(":", ",").split(",") if p.strip()]
    if not parts or len(parts) > 256:
        raise argparse.ArgumentTypeError(f"not a list of job ids: {text!r}")
    return [_job_id(p.strip()) for p in parts]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputui",
        add_help=True,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=FINDING_THE_HEAD,
    )
    p.add_argument(
        "--hosts",
        metavar="FILE",
        help="hosts.yaml (for head.socket; else the console's search, trusted files only)",
    )
    p.add_argument(
        "--socket",
        metavar="PATH",
        help="the head's socket (else $GPUTUI_HEAD_SOCKET, hosts.yaml's head:, the default)",
    )
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    _verb_parsers(sub)
    for verb in sub.choices.values():  # every verb's --help says how the head is found
        verb.formatter_class = argparse.RawDescriptionHelpFormatter
        verb.epilog = FINDING_THE_HEAD + "  (give --socket and --hosts before the verb)\n"
    return p


def _verb_parsers(sub: Any) -> None:

    c = sub.add_parser("claim", help="claim GPUs: by name (HOST:INDEX or uuid) or -g N")
    c.add_argument("gpu", nargs="*", help="GPUs to claim (HOST:INDEX or uuid)")
    c.add_argument("-g", "--gpus", type=gpu_count, help="how many free GPUs")
    c.add_argument("--pool")
    c.add_argument("--model", help="GPU model, e.g. a100")
    c.add_argument("--host")
    c.add_argument("--for", dest="duration", type=parse_duration, help="release after (2h, 1d)")
    c.add_argument("--note", default="")
    c.add_argument("--project", help="tag the claim for accounting")
    c.add_argument("--no-wait", action="store_true", help="refuse rather than queue")
    c.add_argument("--json", action="store_true")

    r = sub.add_parser("release", help="release claimed GPUs")
    r.add_argument("gpu", nargs="*", help="GPUs (HOST:INDEX or uuid) or claim ids (c12)")
    r.add_argument("--all", action="store_true")
    r.add_argument("--reason")

    for name in ("claims", "queue"):
        about = "list claims" if name == "claims" else "list the queue, then flagged processes"
        q = sub.add_parser(name, help=about)
        q.add_argument("--all", action="store_true", help="finished ones too")
        q.add_argument("--user", help="only this user's (a name no account has: exit 2)")
        q.add_argument("--json", action="store_true")
        if name == "queue":
            q.add_argument(
                "-o",
                "--format",
                metavar="FORMAT",
                help="squeue's field letters: %%i id, %%j name, %%u user, %%T state, %%t its"
                " code, %%M time used, %%l time limit, %%D or %%b GPUs, %%R reason or host,"
                " %%P pool, %%Q priority, %%V submitted, %%S started, %%h host wanted;"
                " %%.10j right-aligns in 10 columns, %%10j pads (both cut what is longer)",
            )

    e = sub.add_parser("env", help="print export CUDA_VISIBLE_DEVICES=... for your claims here")
    e.add_argument("--host", help="host (default: this machine's name)")

    s = sub.add_parser("submit", help="queue a job: gputui submit -g 2 -- python train.py")
    s.add_argument("-g", "--gpus", type=gpu_count, default=1)
    s.add_argument("--pool")
    s.add_argument("--host")
    s.add_argument("--name")
    s.add_argument("--cwd", help="working directory on the host (default: this one)")
    s.add_argument("--time", type=parse_duration, help="time limit (30m, 2h, 1-00:00)")
    s.add_argument("--preemptible", action="store_true")
    s.add_argument("--priority", help="priority class (urgent, normal, low, night by default)")
    s.add_argument("--project", help="tag the job for accounting")
    s.add_argument("--after", type=_job_ids, metavar="JOB[,JOB...]", help="start after these ended")
    s.add_argument(
        "--after-ok",
        type=_job_ids,
        metavar="JOB[,JOB...]",
        help="start after these completed; cancelled if one did not",
    )
    s.add_argument("--json", action="store_true")
    s.add_argument("command", nargs=argparse.REMAINDER)

    run = sub.add_parser("run", help="wait for GPUs here, run CMD with them, release after")
    run.add_argument("-g", "--gpus", type=gpu_count, default=1)
    run.add_argument("--pool")
    run.add_argument("--host", help="host name in hosts.yaml (default: this machine's)")
    run.add_argument("command", nargs=argparse.REMAINDER)

    sh = sub.add_parser("show", help="everything about one job")
    sh.add_argument("job", type=_job_id)
    sh.add_argument("--json", action="store_true")

    for name in ("cancel", "kill", "preempt", "requeue", "hold", "release-hold"):
        a = sub.add_parser(name, help=f"{name} jobs")
        a.add_argument("job", type=_job_id, nargs="+")
        a.add_argument("--reason", help="required for an admin acting on another's job")
        if name == "requeue":
            a.add_argument(
                "--force",
                action="store_true",
                help="requeue a job that ended: its owner's command runs again, as its owner",
            )

    lg = sub.add_parser("logs", help="a job's output")
    lg.add_argument("job", type=_job_id)
    lg.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep reading as it grows; a requeued job's new run is shown from its start, "
        "after a line '--- job J: run N (requeued) ---'",
    )

    w = sub.add_parser("wait", help="wait for a job; exit with its exit code")
    w.add_argument("job", type=_job_id)

    au = sub.add_parser("audit", help="admin actions")
    au.add_argument("--since", help="YYYY-MM-DD or epoch seconds")
    au.add_argument("--json", action="store_true")

    me = sub.add_parser("whoami", help="who the head thinks you are")
    me.add_argument("--json", action="store_true")
    no = sub.add_parser(
        "notices", help="what the head told you (preemptions, ends, drains): unread, then read"
    )
    no.add_argument("--all", action="store_true", help="the newest 200, read or not")
    no.add_argument("--json", action="store_true")
    _policy_parsers(sub)
    _usage_parsers(sub)
    _drain_parsers(sub)
    _force_free_parser(sub)
    _gpus_parser(sub)


def _gpus_parser(sub: Any) -> None:
    g = sub.add_parser(
        "gpus",
        help="every GPU: its state, holder, use, and why it is unavailable",
        description=(
            "Every GPU with its state (free, claimed, job, rogue, stray, drained, fenced,"
            " unhealthy), its holder (job or claim id and user, or the pid and user of"
            " a process nobody was given the card for), utilisation, memory used/total,"
            " and why it is unavailable. Free means unclaimed and idle: no job, no"
            " claim, no process on it. A free card with phantom memory, a rogue process"
            " or a health warning says so: placement uses it last."
        ),
    )
    g.add_argument("--free", action="store_true", help="only the free ones (unclaimed and idle)")
    g.add_argument("--pool", help="only this pool's GPUs")
    g.add_argument("--json", action="store_true", help="every field, in full")


def _policy_parsers(sub: Any) -> None:
    e = sub.add_parser("explain", help="why a job waits: its place, factors, start estimate")
    e.add_argument("job", type=_job_id)
    e.add_argument("--json", action="store_true")
    q = sub.add_parser("quota", help="use against each weekly GPU-hour quota")
    q.add_argument("--json", action="store_true")


def _usage_parsers(sub: Any) -> None:
    u = sub.add_parser("usage", help="GPU-hours, busy hours, energy and cost by user, group, …")
    u.add_argument("--since", help="YYYY-MM-DD (local) or 7d, 12h, 2w ago (default: 7d)")
    u.add_argument("--until", help="YYYY-MM-DD (that whole day) or 1d ago (default: now)")
    u.add_argument("--by", default="user", help="user (default), group, project or pool")
    u.add_argument("--daily", action="store_true", help="a row per day and key")
    u.add_argument("--csv", action="store_true")
    u.add_argument("--json", action="store_true")

    r = sub.add_parser("report", help="a weekly summary to paste into a chat")
    r.add_argument("--week", action="store_true", help="the last 7 days (the default)")
    r.add_argument("--json", action="store_true")

    h = sub.add_parser(
        "history", help="finished jobs: exit, GPU-hours, busy share, energy (like sacct)"
    )
    h.add_argument(
        "--user", help="this user's (default: yours; another's: an admin, or private_data off)"
    )
    h.add_argument("-a", "--all-users", action="store_true", help="everyone's (the same rule)")
    h.add_argument(
        "--state",
        metavar="STATE[,STATE...]",
        help="completed, failed, timeout, killed, cancelled (or Slurm's CD, F, TO, CA)",
    )
    h.add_argument("--since", help="ended after: YYYY-MM-DD (local) or 7d, 12h, 2w ago (7d)")
    h.add_argument("--until", help="ended before: YYYY-MM-DD (that whole day) or 1d ago (now)")
    h.add_argument("--limit", metavar="N", help="the newest N (default 100, at most 10000)")
    h.add_argument("--json", action="store_true")


def _drain_parsers(sub: Any) -> None:
    d = sub.add_parser("drain", help="no new jobs or claims on a host or GPU (admins)")
    d.add_argument("target", metavar="HOST[:GPU]", help="a host, or one GPU by index or uuid")
    d.add_argument("--reason", required=True, help="why (kept in the audit log)")
    d.add_argument("--json", action="store_true")
    u = sub.add_parser("undrain", help="take new work on a drained host or GPU again (admins)")
    u.add_argument("target", metavar="HOST[:GPU]")
    u.add_argument("--reason", help="why (kept in the audit log)")
    u.add_argument("--json", action="store_true")
    f = sub.add_parser("unfence", help="clear the head's automatic fence of a GPU (admins)")
    f.add_argument("target", metavar="HOST:GPU")
    f.add_argument("--reason", required=True, help="why (kept in the audit log)")
    f.add_argument("--json", action="store_true")


_TARGET = re.compile(r"\A([^:\s]{1,128}):([0-9]{1,2}|(?:GPU|MIG)-[0-9A-Za-z/-]{1,92})\Z")


def target(text: str) -> tuple[str, str]:
    """``HOST:GPU`` (GPU: its index or uuid) -> (host, gpu); argparse's type."""
    match = _TARGET.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not HOST:GPU (GPU: its index or uuid): {shown(text, 60)!r}"
        )
    return match.group(1), match.group(2)


def _force_free_parser(sub: Any) -> None:
    f = sub.add_parser(
        "force-free",
        help="admins: take a stuck GPU back (drain, SIGTERM, SIGKILL, check its memory)",
    )
    f.add_argument("gpu", type=target, metavar="HOST:GPU", help="the GPU, by index or uuid")
    f.add_argument("--reason", required=True, help="why (audited; its owners are told)")
    f.add_argument(
        "--reset",
        action="store_true",
        help="reset the GPU if its memory stays held with no process (head.allow_gpu_reset)",
    )
    f.add_argument("--json", action="store_true", help="the final result as JSON")


def said(exc: HeadError, verb: str) -> str:
    """The scheduler's refusal without its own ``op:`` prefix (the line already names
    the verb)."""
    return exc.message.removeprefix(f"{verb.replace('-', '_')}: ")


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (``submit``, ``run``); a usage error without one."""
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise HeadError("usage", f"{args.verb}: give the command after --")
    return cmd
