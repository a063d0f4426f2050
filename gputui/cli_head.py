"""The scheduler's command-line verbs: claim, release, submit, queue, run, logs, …

Each verb is one short-lived process that talks to the head's socket, so this
module imports only argparse, json and the light client: a ``gputui submit``
costs a few tens of milliseconds, not the console's start-up. Every failure is
one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gputui import cli_drain, cli_forcefree, cli_policy, cli_usage
from gputui.cli_flags import flags_table, idle_reason
from gputui.durations import elapsed_text, parse_duration
from gputui.printable import shown as _shown
from gputui.scheduler.client import HeadClient, HeadError, head_place

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
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


def _said(exc: HeadError, verb: str) -> str:
    """The head's refusal without its own ``op:`` prefix (the line already names the verb)."""
    return exc.message.removeprefix(f"{verb.replace('-', '_')}: ")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gputui", add_help=True)
    p.add_argument("--hosts", metavar="FILE", help="hosts.yaml (for head.socket)")
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

    lg = sub.add_parser("logs", help="a job's output")
    lg.add_argument("job", type=_job_id)
    lg.add_argument("-f", "--follow", action="store_true")

    w = sub.add_parser("wait", help="wait for a job; exit with its exit code")
    w.add_argument("job", type=_job_id)

    au = sub.add_parser("audit", help="admin actions")
    au.add_argument("--since", help="YYYY-MM-DD or epoch seconds")
    au.add_argument("--json", action="store_true")

    sub.add_parser("whoami", help="who the head thinks you are")
    cli_policy.add_parsers(sub, _job_id)
    cli_usage.add_parsers(sub)
    cli_drain.add_parsers(sub)
    cli_forcefree.add_parsers(sub)
    return p


def _command(args: argparse.Namespace) -> list[str]:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise HeadError("usage", f"{args.verb}: give the command after --")
    return cmd


def _when(epoch: float | None) -> str:
    return "-" if not epoch else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def queue_table(jobs: Sequence[dict[str, Any]], now: float, idle_after_s: Any = None) -> list[str]:
    """Slurm-like columns: JOBID USER NAME STATE GPUS HOST TIME REASON (a running job
    idle past the head's limit, ``idle_after_s``, says ``Idle 2h05m`` there)."""
    rows = [("JOBID", "USER", "NAME", "STATE", "GPUS", "HOST", "TIME", "REASON")]
    for job in jobs:
        started = job.get("started_at")
        ended = job.get("ended_at")
        elapsed = elapsed_text((ended or now) - started) if started else "0:00"
        rows.append(
            (
                str(job["id"]),
                _shown(job.get("user", ""), 12),
                _shown(job.get("name", ""), 20),
                _shown(job.get("state", ""), 10),
                str(job.get("gpus", "")),
                _shown(job.get("host") or "-", 16),
                elapsed,
                _shown(idle_reason(job, idle_after_s, now) or job.get("reason") or "-", 40),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def claims_table(claims: Sequence[dict[str, Any]], now: float) -> list[str]:
    rows = [("CLAIM", "USER", "STATE", "GPUS", "HOST", "AGE", "EXPIRES", "NOTE")]
    for c in claims:
        since = c.get("granted_at") or c.get("created_at") or now
        expires = c.get("expires_at")
        rows.append(
            (
                f"c{c['id']}",
                _shown(c.get("user", ""), 12),
                _shown(c.get("state", ""), 9)
                + (
                    ""
                    if c.get("state") == "active"
                    else f" ({c.get('reason') or c.get('release_reason') or ''})"
                ),
                str(len(c.get("gpu_uuids") or []) or c.get("gpus", "")),
                _shown(c.get("host") or "-", 16),
                elapsed_text(now - since),
                _when(expires) if expires else "-",
                _shown(c.get("note") or "", 30),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _this_host() -> str:
    return socket.gethostname().split(".")[0]


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except ValueError:
        raise HeadError("usage", f"--since: not a date: {text!r} (YYYY-MM-DD)") from None


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _claim(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"note": a.note, "wait": not a.no_wait}
    if a.gpu:
        body["gpu_refs"] = a.gpu
    if a.gpus is not None:
        body["gpus"] = a.gpus
    for key in ("pool", "model", "host", "project"):
        if getattr(a, key):
            body[key] = getattr(a, key)
    if a.duration:
        body["duration_s"] = a.duration
    result = client.call("claim", body)["claim"]
    if a.json:
        _print_json(result)
    elif result["state"] == "active":
        print(f"claim c{result['id']}: {', '.join(result['gpu_uuids'])} on {result['host']}")
        print('use them with:  eval "$(gputui env)"')
    else:
        print(f"claim c{result['id']} waits ({result['reason']}); see `gputui claims`")
    return EXIT_OK


def _release(client: HeadClient, a: argparse.Namespace) -> int:
    ids = [int(x[1:]) for x in a.gpu if re.fullmatch(r"c\d+", x)]
    refs = [x for x in a.gpu if not re.fullmatch(r"c\d+", x)]
    body: dict[str, Any] = {"claim_ids": ids, "gpu_refs": refs, "all": a.all}
    if a.reason:
        body["reason"] = a.reason
    released = client.call("release", body)["released"]
    for c in released:
        print(f"released c{c['id']} ({', '.join(c['gpu_uuids']) or 'waiting'})")
    if not released:
        print("nothing to release")
    return EXIT_OK


def _submit(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "argv": _command(a),
        "gpus": a.gpus,
        "cwd": os.path.abspath(a.cwd) if a.cwd else os.getcwd(),
        "preemptible": a.preemptible,
    }
    for key, field in (
        ("pool", "pool"),
        ("host", "host"),
        ("name", "name"),
        ("time", "time_limit_s"),
        ("priority", "priority"),
        ("project", "project"),
    ):
        if getattr(a, key) is not None:
            body[field] = getattr(a, key)
    if a.after and a.after_ok:
        raise HeadError("usage", "submit: give --after or --after-ok, not both")
    if a.after or a.after_ok:
        body["after"] = a.after or a.after_ok
        body["after_ok"] = bool(a.after_ok)
    job = client.call("submit", body)["job"]
    if a.json:
        _print_json(job)
    else:
        print(job["id"])
    return EXIT_OK


def _list(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"all": a.all}
    if a.user:
        body["user"] = a.user
    result = client.call(a.verb, body)
    items = result["jobs" if a.verb == "queue" else "claims"]
    if a.json:
        _print_json(items)
        return EXIT_OK
    now = time.time()
    if a.verb == "queue":
        lines = queue_table(items, now, result.get("idle_after_s"))
        lines += flags_table(result.get("flags"), now)
        lines += cli_drain.unavailable_table(result.get("unavailable"), now)
    else:
        lines = claims_table(items, now)
    for line in lines:
        print(line)
    return EXIT_OK


def _show(client: HeadClient, a: argparse.Namespace) -> int:
    result = client.call("show", {"job_id": a.job})
    if a.json:
        _print_json(result)
        return EXIT_OK
    job = result["job"]
    for key in (
        "id",
        "name",
        "user",
        "state",
        "reason",
        "gpus",
        "pool",
        "host",
        "gpu_uuids",
        "argv",
        "cwd",
        "time_limit_s",
        "preemptible",
        "exit_code",
        "exit_signal",
        "requeues",
        "run_as",
        "log_path",
    ):
        value = job.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        print(f"{key:>14}: {_shown(value if value not in (None, '') else '-', 200)}")
    for key in ("submitted_at", "started_at", "ended_at"):
        print(f"{key:>14}: {_when(job.get(key))}")
    return EXIT_OK


def _act(client: HeadClient, a: argparse.Namespace) -> int:
    op = a.verb.replace("-", "_")
    code = EXIT_OK
    for job_id in a.job:
        body: dict[str, Any] = {"job_id": job_id}
        if a.reason:
            body["reason"] = a.reason
        try:
            job = client.call(op, body)["job"]
        except HeadError as exc:
            if exc.code == "unreachable":
                raise
            print(f"gputui {a.verb}: {_said(exc, a.verb)}", file=sys.stderr)
            code = EXIT_REFUSED
            continue
        print(f"job {job['id']}: {job['state']}")
    return code


def _logs(client: HeadClient, a: argparse.Namespace) -> int:
    offset = 0
    out = sys.stdout
    while True:
        result = client.call("logs", {"job_id": a.job, "offset": offset})
        data = result.get("data", "")
        if data:
            out.write(data)
            out.flush()
        offset = int(result.get("offset", offset))
        if not a.follow:
            if data and result.get("size", 0) > offset:
                continue
            return EXIT_OK
        if (
            result.get("ended")
            and result.get("state") in ("completed", "failed", "timeout", "killed", "cancelled")
            and not data
        ):
            return EXIT_OK
        if not data:
            time.sleep(0.5)


def _wait(client: HeadClient, a: argparse.Namespace) -> int:
    job = client.call("wait", {"job_id": a.job}, timeout=None)["job"]
    state = job["state"]
    if state == "completed":
        return 0
    if job.get("exit_code") is not None:
        return int(job["exit_code"]) or 1
    print(f"job {job['id']} {state}: {job.get('reason') or ''}".rstrip(), file=sys.stderr)
    return 128 + 9 if state == "killed" else 1


def _audit(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    since = _since(a.since)
    if since is not None:
        body["since"] = since
    rows = client.call("audit", body)["rows"]
    if a.json:
        _print_json(rows)
        return EXIT_OK
    print("TIME                 ADMIN        ACTION        TARGET      OWNER        REASON")
    for r in rows:
        cells = (
            f"{_when(r['time']):20}",
            f"{_shown(r['user'], 12):12}",
            f"{_shown(r['action'], 13):13}",
            f"{_shown(r['target'], 11):11}",
            f"{_shown(r['owner'], 12):12}",
            _shown(r["reason"], 60),
        )
        print(" ".join(cells))
    return EXIT_OK


def _env(client: HeadClient, a: argparse.Namespace) -> int:
    result = client.call("env", {"host": a.host or _this_host()})
    if not result["uuids"]:
        print(f"# no active claim of yours on {a.host or _this_host()}", file=sys.stderr)
        return EXIT_REFUSED
    print(result["line"])
    return EXIT_OK


def _one_line(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _dies_with_us() -> Callable[[], None] | None:
    """For the child's side of the fork: SIGTERM when this process dies, however it
    dies (``kill -9`` too), so CMD does not run on with GPUs the head gives away. The
    head keeps the GPUs claimed while a process of CMD's user is still on them.
    Linux only (``PR_SET_PDEATHSIG``); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None

    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # gputui died between the fork and here
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _run(client: HeadClient, a: argparse.Namespace) -> int:
    """Claim GPUs for this connection, run CMD, release: the head releases them too
    when this process dies in any way (its connection to the head drops)."""
    command = _command(a)
    host = a.host or _this_host()
    body: dict[str, Any] = {
        "gpus": a.gpus,
        "host": host,
        "wait": True,
        "session": True,
        # The command as a note, on one printable line (the head refuses control
        # characters, and a `python -c` script is often several lines).
        "note": _one_line(" ".join(command))[:200],
    }
    if a.pool:
        body["pool"] = a.pool
    # Not retried on a new connection: this claim ends with the connection it was
    # made on, so a replayed "active" would name GPUs the head is taking back.
    claim = client.call("claim", body, retry=False)["claim"]
    if claim["state"] != "active":
        print(
            f"gputui run: waiting for {a.gpus} GPU(s) on {host} ({claim['reason']})…",
            file=sys.stderr,
        )
        client.call("subscribe")
        for push in client.pushes():
            if push.get("push") != "state":
                continue
            mine = [c for c in push["state"]["claims"] if c["id"] == claim["id"]]
            if not mine:
                raise HeadError("released", f"claim c{claim['id']} went away while waiting")
            if mine[0]["state"] == "active":
                claim = mine[0]
                break
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(claim["gpu_uuids"])
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    print(f"gputui run: c{claim['id']}: {env['CUDA_VISIBLE_DEVICES']}", file=sys.stderr)
    try:
        # The one other thread (the SSH pump, for a remote head) takes no lock the
        # child needs: the hook calls one C function resolved before the fork.
        child = subprocess.Popen(command, env=env, preexec_fn=_dies_with_us())  # noqa: PLW1509
    except OSError as exc:
        client.call("release", {"claim_ids": [claim["id"]]})
        raise HeadError("exec", f"cannot run {command[0]!r}: {exc.strerror or exc}") from None

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    code = child.wait()
    # The head releases a session's claim when the connection closes anyway.
    with contextlib.suppress(HeadError):
        client.call("release", {"claim_ids": [claim["id"]]})
    return code if code >= 0 else 128 - code


def _whoami(client: HeadClient, a: argparse.Namespace) -> int:
    me = client.call("whoami")
    print(
        f"{me['user']} (uid {me['uid']}), groups {', '.join(me['groups'])}"
        + (", admin" if me["admin"] else "")
    )
    return EXIT_OK


HANDLERS: dict[str, Callable[[HeadClient, argparse.Namespace], int]] = {
    "claim": _claim,
    "release": _release,
    "claims": _list,
    "queue": _list,
    "env": _env,
    "run": _run,
    "submit": _submit,
    "show": _show,
    "cancel": _act,
    "kill": _act,
    "preempt": _act,
    "requeue": _act,
    "hold": _act,
    "release-hold": _act,
    "logs": _logs,
    "wait": _wait,
    "audit": _audit,
    "whoami": _whoami,
    "explain": cli_policy.explain,
    "quota": cli_policy.quota,
    "usage": cli_usage.run_usage,
    "report": cli_usage.run_report,
    "drain": cli_drain.run,
    "undrain": cli_drain.run,
    "unfence": cli_drain.run,
    "force-free": cli_forcefree.run,
}


def _over_ssh(config_file: Path) -> Callable[[], socket.socket]:
    """Connections to a head on another machine, through SSH (only this path loads
    the whole configuration and asyncssh)."""
    from gputui.config import ConfigError, load_config
    from gputui.scheduler.headssh import ssh_socket

    try:
        config = load_config(config_file)
    except ConfigError as exc:
        raise HeadError("config", "; ".join(exc.lines[:3])) from None
    return lambda: ssh_socket(config)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        path, remote = head_place(args.socket, args.hosts)
        opener = None if remote is None else _over_ssh(remote)
        with HeadClient(path, opener=opener) as client:
            return HANDLERS[args.verb](client, args)
    except HeadError as exc:
        print(f"gputui {args.verb}: {_said(exc, args.verb)}", file=sys.stderr)
        if exc.code == "usage":
            return EXIT_USAGE
        if exc.code in ("unreachable", "timeout", "config"):
            return EXIT_UNREACHABLE
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except (ConnectionError, EOFError, OSError) as exc:  # the head went away mid-answer
        print(f"gputui {args.verb}: lost the head: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
