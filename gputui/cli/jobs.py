"""The scheduler's command-line verbs: claim, release, submit, queue, run, logs, …

Each verb is one short-lived process that talks to the head's socket, so this
module imports only argparse, json and the light client: a ``gputui submit``
costs a few tens of milliseconds, not the console's start-up. Every failure is
one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gputui.cli import drain as cli_drain
from gputui.cli import forcefree as cli_forcefree
from gputui.cli import policy as cli_policy
from gputui.cli import run as cli_run
from gputui.cli import usage as cli_usage
from gputui.cli.args import parser
from gputui.cli.flagged import flags_table
from gputui.cli.run import command_of, this_host
from gputui.cli.tables import audit_table, claims_table, queue_table, when
from gputui.gpu_env import export_line, gpu_uuids
from gputui.printable import shown as _shown
from gputui.scheduler.client import HeadClient, HeadError, head_place

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def _said(exc: HeadError, verb: str) -> str:
    """The head's refusal without its own ``op:`` prefix (the line already names the verb)."""
    return exc.message.removeprefix(f"{verb.replace('-', '_')}: ")


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
        "argv": command_of(a),
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


PAGE = 5_000
MAX_PAGES = 200
"""``queue`` and ``claims`` follow the head's pages, up to a million rows."""


def _list(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"all": a.all, "limit": PAGE}
    if a.user:
        body["user"] = a.user
    key = "jobs" if a.verb == "queue" else "claims"
    result = client.call(a.verb, body)
    items = list(result[key])
    after = result.get("next")
    for _ in range(MAX_PAGES - 1):
        if not isinstance(after, int) or isinstance(after, bool):
            break
        page = client.call(a.verb, {**body, "after": after})
        items += page[key]
        after = page.get("next")
    if isinstance(after, int) and not isinstance(after, bool):
        print(
            f"gputui {a.verb}: the first {len(items)} shown, more after id {after}"
            " not shown (narrow it with --user)",
            file=sys.stderr,
        )
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
    hidden = job.get("private") is True  # scheduler.private_data: not yours to see
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
        if hidden and key not in job:
            value = "(private)"
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        print(f"{key:>14}: {_shown(value if value not in (None, '') else '-', 200)}")
    if job.get("preempted_by") and isinstance(job.get("preempted_at"), (int, float)):
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job["preempted_at"]))
        print(f"{'last preempted':>14}: {_shown(job['preempted_by'], 200)} at {at}")
    for key in ("submitted_at", "started_at", "ended_at"):
        print(f"{key:>14}: {when(job.get(key))}")
    return EXIT_OK


def _act(client: HeadClient, a: argparse.Namespace) -> int:
    op = a.verb.replace("-", "_")
    code = EXIT_OK
    for job_id in a.job:
        body: dict[str, Any] = {"job_id": job_id}
        if a.reason:
            body["reason"] = a.reason
        if getattr(a, "force", False):
            body["force"] = True
        try:
            answer = client.call(op, body)
            job = answer["job"]
        except HeadError as exc:
            if exc.code == "unreachable":
                raise
            print(f"gputui {a.verb}: {_said(exc, a.verb)}", file=sys.stderr)
            code = EXIT_REFUSED
            continue
        told = answer.get("told")
        line = f"job {_shown(job['id'])}: {_shown(job['state'])}"
        print(line + (f": {_shown(told, 300)}" if told else ""))
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
    for line in audit_table(rows):
        print(line)
    return EXIT_OK


def _env(client: HeadClient, a: argparse.Namespace) -> int:
    """The line is built here from the answer's UUIDs, each checked: whatever else the
    head sends never reaches the shell that evals it."""
    host = a.host or this_host(client)
    result = client.call("env", {"host": host})
    try:
        uuids = gpu_uuids(result.get("uuids") if isinstance(result, dict) else None)
    except ValueError:
        raise HeadError("protocol", "the head's answer names no valid GPU UUIDs") from None
    if not uuids:
        print(f"# no active claim of yours on {_shown(host, 64)}", file=sys.stderr)
        return EXIT_REFUSED
    print(export_line(uuids))
    return EXIT_OK


def _notices(client: HeadClient, a: argparse.Namespace) -> int:
    """Your unread notices (marked read by the head once sent), or ``--all``."""
    rows = client.call("notices", {"all": bool(a.all)})["notices"]
    if a.json:
        json.dump(rows, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    if not rows:
        print("no notices" if a.all else "no unread notices")
        return EXIT_OK
    for n in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(n["time"])))
        new = "*" if n.get("unread") and a.all else " "
        print(f"{new}{when}  {_shown(n['kind'], 10):10} {_shown(n['text'], 512)}")
    return EXIT_OK


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
    "run": cli_run.run,
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
    "notices": _notices,
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
    args = parser().parse_args(list(argv))
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
