"""The job verbs: ``gputui submit``, ``queue``, ``show``, ``logs``, ``wait``, and the
actions on jobs (``cancel``, ``kill``, ``preempt``, ``requeue``, ``hold``,
``release-hold``).

Loaded only when one of them runs (``verbs.handler``); they ask the scheduler
through its ``SchedulerBackend``, and show what it answers as untrusted text.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable

from gputui.cli import qformat
from gputui.cli.args import EXIT_OK, EXIT_REFUSED, command_of, said
from gputui.cli.flagged import flags_table
from gputui.cli.layout import terminal_width
from gputui.cli.listing import every_page, known_user, nothing_line
from gputui.cli.tables import print_json, queue_table, unavailable_table, when
from gputui.common.durations import coarse_text
from gputui.common.printable import shown
from gputui.scheduler.client.backend import Answer, SyncBackend
from gputui.scheduler.client.errors import HeadError


def submit(backend: SyncBackend, a: argparse.Namespace) -> int:
    argv = command_of(a)
    cwd = os.path.abspath(a.cwd) if a.cwd else os.getcwd()
    if a.after and a.after_ok:
        raise HeadError("usage", "submit: give --after or --after-ok, not both")
    job = backend.submit(
        argv=argv,
        gpus=a.gpus,
        cwd=cwd,
        preemptible=a.preemptible,
        pool=a.pool,
        host=a.host,
        name=a.name,
        time_limit_s=a.time,
        priority=a.priority,
        project=a.project,
        after=a.after or a.after_ok,
        after_ok=bool(a.after_ok),
    )["job"]
    if a.json:
        print_json(job)
    else:
        print(job["id"])
    return EXIT_OK


def queue(backend: SyncBackend, a: argparse.Namespace) -> int:
    parts = _format(a)

    def page(limit: int, after: int | None) -> Answer:
        return backend.queue(all=a.all, user=a.user, limit=limit, after=after)

    items, result = every_page(page, "jobs", a.verb)
    known_user(a.user, items)
    if a.json:
        print_json(items)
        return EXIT_OK
    now, width = time.time(), terminal_width()
    if parts is not None:
        for line in qformat.lines(parts, items, now):
            print(line)
        return EXIT_OK
    lines = queue_table(items, now, result.get("idle_after_s"), width)
    if not items:
        lines.append(nothing_line("jobs", a))
    lines += flags_table(result.get("flags"), now, width)
    lines += unavailable_table(result.get("unavailable"), now, width)
    for line in lines:
        print(line)
    return EXIT_OK


def _format(a: argparse.Namespace) -> list[qformat.Part] | None:
    """``-o FORMAT``'s parts (None: the usual table); a usage error in one line."""
    spec = getattr(a, "format", None)
    if spec is None:
        return None
    if a.json:
        raise HeadError("usage", "give --json or --format, not both")
    try:
        return qformat.parse(spec)
    except qformat.FormatError as exc:
        raise HeadError("usage", str(exc)) from None


SHOWN = (
    ("id", "id"),
    ("name", "name"),
    ("user", "user"),
    ("state", "state"),
    ("reason", "reason"),
    ("gpus", "gpus"),
    ("pool", "pool"),
    ("host_constraint", "host wanted"),
    ("host", "host"),
    ("gpu_uuids", "gpu_uuids"),
    ("argv", "argv"),
    ("cwd", "cwd"),
    ("priority", "priority"),
    ("time_limit_s", "time limit"),
    ("preemptible", "preemptible"),
    ("after", "after"),
    ("project", "project"),
    ("exit_code", "exit_code"),
    ("exit_signal", "exit_signal"),
    ("requeues", "requeues"),
    ("run_as", "run_as"),
    ("log_path", "log_path"),
)
"""(field, label) of what ``gputui show`` prints, in order (then when it was
submitted, started and ended)."""


def human(key: str, value: object, job: Answer) -> str:
    """A field of ``show`` as a person reads it: yes/no, 10m, a shell-quoted argv."""
    if value is None or value in ("", []):
        return "-" if key != "host_constraint" else "any"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "time_limit_s" and isinstance(value, (int, float)):
        return coarse_text(float(value))
    if key == "argv" and isinstance(value, list):
        return shlex.join(str(v) for v in value)
    if key == "after" and isinstance(value, list):
        ids = ", ".join(str(v) for v in value)
        ok = job.get("after_ok") is True
        return ids + (" (each must complete)" if ok else " (each must end)")
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def show(backend: SyncBackend, a: argparse.Namespace) -> int:
    result = backend.show(a.job)
    if a.json:
        print_json(result)
        return EXIT_OK
    job = result["job"]
    hidden = job.get("private") is True  # scheduler.private_data: not yours to see
    for key, label in SHOWN:
        text = "(private)" if hidden and key not in job else human(key, job.get(key), job)
        print(f"{label:>14}: {shown(text, 400)}")
    if job.get("preempted_by") and isinstance(job.get("preempted_at"), (int, float)):
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job["preempted_at"]))
        print(f"{'last preempted':>14}: {shown(job['preempted_by'], 200)} at {at}")
    for key in ("submitted_at", "started_at", "ended_at"):
        print(f"{key:>14}: {when(job.get(key))}")
    return EXIT_OK


def _action(backend: SyncBackend, a: argparse.Namespace) -> Callable[[int], Answer]:
    """The request ``a.verb`` makes of one job."""
    reason = a.reason
    if a.verb == "cancel":
        return lambda job_id: backend.cancel(job_id, reason=reason)
    if a.verb == "kill":
        return lambda job_id: backend.kill(job_id, reason=reason)
    if a.verb == "preempt":
        return lambda job_id: backend.preempt(job_id, reason=reason)
    if a.verb == "hold":
        return lambda job_id: backend.hold(job_id, reason=reason)
    if a.verb == "release-hold":
        return lambda job_id: backend.release_hold(job_id, reason=reason)
    force = bool(getattr(a, "force", False))
    return lambda job_id: backend.requeue(job_id, reason=reason, force=force)


def act(backend: SyncBackend, a: argparse.Namespace) -> int:
    """One line a job; a refusal of one does not stop the others (exit 1 after)."""
    ask = _action(backend, a)
    code = EXIT_OK
    for job_id in a.job:
        try:
            answer = ask(job_id)
            job = answer["job"]
        except HeadError as exc:
            if exc.code == "unreachable":
                raise
            print(f"gputui {a.verb}: {said(exc, a.verb)}", file=sys.stderr)
            code = EXIT_REFUSED
            continue
        told = answer.get("told")
        line = f"job {shown(job['id'])}: {shown(job['state'])}"
        print(line + (f": {shown(told, 300)}" if told else ""))
    return code


ENDED = frozenset({"completed", "failed", "timeout", "killed", "cancelled", "out_of_memory",
                   "node_fail", "preempted", "boot_fail", "deadline", "revoked",
                   "special_exit"})  # fmt: skip
"""A job's states once it has ended, the head's and Slurm's (in lower case)."""


def run_of(result: Answer) -> int | None:
    """Which run of the job a ``logs`` answer read (0: none yet); None from a head that
    does not say (older heads), or says something that is not a run number."""
    run = result.get("run")
    if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run <= 2**31:
        return None
    return run


def logs(backend: SyncBackend, a: argparse.Namespace) -> int:
    """A job's output; with ``-f`` as it grows. A requeued job's next run has a log of
    its own: read from its start, after one line saying where the new run begins."""
    offset = 0
    run: int | None = None
    out = sys.stdout
    at_line_start = True
    while True:
        result = backend.logs(a.job, offset=offset)
        now = run_of(result)
        if now is not None and run is not None and now != run:
            if run > 0 and now > 0:
                mark = f"--- job {a.job}: run {now} (requeued) ---\n"
                out.write(mark if at_line_start else "\n" + mark)
                out.flush()
                at_line_start = True
            if offset:  # read past the new run's start: ask again from it
                run, offset = now, 0
                continue
        if now is not None:
            run = now
        data = result.get("data", "")
        if data:
            out.write(data)
            out.flush()
            at_line_start = data.endswith("\n")
        offset = int(result.get("offset", offset))
        if not a.follow:
            if data and result.get("size", 0) > offset:
                continue
            return EXIT_OK
        if result.get("ended") and str(result.get("state")).lower() in ENDED and not data:
            return EXIT_OK
        if not data:
            time.sleep(0.5)


def wait(backend: SyncBackend, a: argparse.Namespace) -> int:
    job = backend.wait(a.job)["job"]
    state = str(job["state"]).lower()  # Slurm's states are its own, in capitals
    if state == "completed":
        return 0
    if job.get("exit_code") is not None:
        return int(job["exit_code"]) or 1
    print(f"job {job['id']} {job['state']}: {job.get('reason') or ''}".rstrip(), file=sys.stderr)
    return 128 + 9 if state == "killed" else 1


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "submit": submit,
    "queue": queue,
    "show": show,
    "cancel": act,
    "kill": act,
    "preempt": act,
    "requeue": act,
    "hold": act,
    "release-hold": act,
    "logs": logs,
    "wait": wait,
}
