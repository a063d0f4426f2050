"""The command line of the scheduler's verbs (``gputui claim``, ``submit``, ``queue``, …).

Argument types check what they can before a request is sent: a job id, a GPU
count within the head's limit, a duration.
"""

from __future__ import annotations

import argparse

from gputui.cli import drain as cli_drain
from gputui.cli import forcefree as cli_forcefree
from gputui.cli import policy as cli_policy
from gputui.cli import usage as cli_usage
from gputui.durations import parse_duration

MAX_GPUS = 64  # the head's own limit (wire.MAX_GPUS_PER_JOB), without importing pydantic
VERBS = (
    "claim",
    "release",
    "claims",
    "env",
    "run",
    "submit",
    "queue",
    "show",
    "cancel",
    "kill",
    "preempt",
    "requeue",
    "hold",
    "release-hold",
    "logs",
    "wait",
    "audit",
    "whoami",
    "notices",
    "explain",
    "quota",
    "usage",
    "report",
    "drain",
    "undrain",
    "unfence",
    "force-free",
)


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


def _gpu_count(text: str) -> int:
    """-g N: a whole number of GPUs, 1 to 64 (all of a request's GPUs are on one host)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r}") from None
    if not 1 <= value <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_GPUS} GPUs, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gputui", add_help=True)
    p.add_argument(
        "--hosts",
        metavar="FILE",
        help="hosts.yaml (for head.socket; else the console's search, trusted files only)",
    )
    p.add_argument("--socket", metavar="PATH", help="the head's socket (else $GPUTUI_HEAD_SOCKET)")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    c = sub.add_parser("claim", help="claim GPUs: by name (HOST:INDEX or uuid) or -g N")
    c.add_argument("gpu", nargs="*", help="GPUs to claim (HOST:INDEX or uuid)")
    c.add_argument("-g", "--gpus", type=_gpu_count, help="how many free GPUs")
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
        q.add_argument("--user")
        q.add_argument("--json", action="store_true")

    e = sub.add_parser("env", help="print export CUDA_VISIBLE_DEVICES=... for your claims here")
    e.add_argument("--host", help="host (default: this machine's name)")

    s = sub.add_parser("submit", help="queue a job: gputui submit -g 2 -- python train.py")
    s.add_argument("-g", "--gpus", type=_gpu_count, default=1)
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
    run.add_argument("-g", "--gpus", type=_gpu_count, default=1)
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
    lg.add_argument("-f", "--follow", action="store_true")

    w = sub.add_parser("wait", help="wait for a job; exit with its exit code")
    w.add_argument("job", type=_job_id)

    au = sub.add_parser("audit", help="admin actions")
    au.add_argument("--since", help="YYYY-MM-DD or epoch seconds")
    au.add_argument("--json", action="store_true")

    sub.add_parser("whoami", help="who the head thinks you are")
    no = sub.add_parser(
        "notices", help="what the head told you (preemptions, ends, drains): unread, then read"
    )
    no.add_argument("--all", action="store_true", help="the newest 200, read or not")
    no.add_argument("--json", action="store_true")
    cli_policy.add_parsers(sub, _job_id)
    cli_usage.add_parsers(sub)
    cli_drain.add_parsers(sub)
    cli_forcefree.add_parsers(sub)
    return p
