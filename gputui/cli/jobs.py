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
from typing import TYPE_CHECKING, Any

from gputui.cli.args import EXIT_OK, EXIT_REFUSED, command_of, said
from gputui.cli.flagged import flags_table
from gputui.cli.layout import pad, terminal_width
from gputui.cli.listing import every_page, known_user, nothing_line
from gputui.cli.tables import print_json, queue_table, unavailable_table, when
from gputui.common.arrays import job_label, task_ref
from gputui.common.durations import coarse_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import reason_text, state_text
from gputui.common.printable import shown
from gputui.scheduler.client.backend import Answer, SyncBackend
from gputui.scheduler.client.errors import HeadError

if TYPE_CHECKING:  # the submitting verbs' and -o's own modules load when they run
    from gputui.cli import qformat
    from gputui.common import jobenv


def submit(backend: SyncBackend, a: argparse.Namespace) -> int:
    from gputui.common import jobscript

    cmd = list(a.command)
    script: jobscript.Script | None = None
    if cmd and cmd[0] != "--" and os.path.isfile(cmd[0]):
        # gputui submit train.sh [ARGS]: a script, copied now, its directives read.
        try:
            script = jobscript.load_script(cmd[0])
        except jobscript.DirectiveError as exc:
            raise HeadError("usage", f"submit: {shown(str(exc), 300)}") from None
        for option in script.ignored:
            print(
                _("gputui submit: warning: #SBATCH {option} has no meaning here; ignored").format(
                    option=shown(option, 40)
                ),
                file=sys.stderr,
            )
    argv = command_of(a)
    given = {k: getattr(a, k, None) for k in jobscript.OPTIONS}
    o = jobscript.merged(script.options if script else {}, given)
    cwd = os.path.abspath(o["cwd"]) if o.get("cwd") else os.getcwd()
    if o.get("after") and o.get("after_ok"):
        raise HeadError("usage", "submit: " + _("give --after or --after-ok, not both"))
    if script is not None:
        argv[0] = os.path.basename(argv[0]) or "script"
    kwargs = jobscript.submit_kwargs({**o, "cwd": cwd})
    if script is not None:
        kwargs["script"] = script.text
    kwargs.setdefault("gpus", 1)
    kwargs.setdefault("preemptible", False)
    setup = job_setup(o, cwd)
    if setup:
        kwargs["setup"] = setup
    if getattr(a, "booking", None) is not None:
        kwargs["booking"] = a.booking
    answer = backend.submit(argv=argv, **kwargs)
    if a.json:
        print_json(answer["job"] if "array" not in answer else answer)
    elif isinstance(answer.get("array"), dict):
        print(answer["array"].get("id"))
    else:
        print(answer["job"]["id"])
    return EXIT_OK


def job_setup(o: dict[str, Any], cwd: str) -> jobenv.JobSetup:
    """``--env``, ``--export``, ``--conda``, ``--venv``, ``--image``, ``--runtime`` (from
    the command line or the script's directives) checked (a usage error in one line),
    the environment taken from this process's."""
    from gputui.common import jobenv

    try:
        return jobenv.setup(
            env=o.get("env"),
            export=o.get("export"),
            conda=o.get("conda"),
            venv=o.get("venv"),
            image=o.get("image"),
            runtime=o.get("runtime"),
            environ=os.environ,
            cwd=cwd,
            reserved=jobenv.RESERVED_ENV,
        )
    except jobenv.JobEnvError as exc:
        raise HeadError("usage", f"submit: {exc}") from None


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
        from gputui.cli import qformat

        for line in qformat.lines(parts, items, now):
            print(line)
        return EXIT_OK
    lines = queue_table(items, now, result.get("idle_after_s"), width)
    if not items:
        lines.append(nothing_line("jobs", a))
    lines += flags_table(result.get("flags"), now, width)
    lines += unavailable_table(result.get("unavailable"), now, width)
    sys.stdout.write("".join(f"{line}\n" for line in lines))  # one write: thousands of jobs
    return EXIT_OK


def _format(a: argparse.Namespace) -> list[qformat.Part] | None:
    """``-o FORMAT``'s parts (None: the usual table); a usage error in one line."""
    spec = getattr(a, "format", None)
    if spec is None:
        return None
    from gputui.cli import qformat

    if a.json:
        raise HeadError("usage", _("give --json or --format, not both"))
    try:
        return qformat.parse(spec)
    except qformat.FormatError as exc:
        raise HeadError("usage", str(exc)) from None


SHOWN = (
    ("id", N_("id")),
    ("name", N_("name")),
    ("user", N_("user")),
    ("state", N_("state")),
    ("reason", N_("reason")),
    ("gpus", N_("gpus")),
    ("pool", N_("pool")),
    ("host_constraint", N_("host wanted")),
    ("host", N_("host")),
    ("gpu_uuids", N_("gpu_uuids")),
    ("argv", N_("argv")),
    ("cwd", N_("cwd")),
    ("priority", N_("priority")),
    ("time_limit_s", N_("time limit")),
    ("preemptible", N_("preemptible")),
    ("interactive", N_("interactive")),
    ("after", N_("after")),
    ("array_id", N_("array")),
    ("script", N_("script")),
    ("output", N_("output")),
    ("project", N_("project")),
    ("conda", N_("conda")),
    ("venv", N_("venv")),
    ("image", N_("image")),
    ("runtime", N_("runtime")),
    ("container_id", N_("container")),
    ("exit_code", N_("exit_code")),
    ("exit_signal", N_("exit_signal")),
    ("requeues", N_("requeues")),
    ("run_as", N_("run_as")),
    ("log_path", N_("log_path")),
)
"""(field, label) of what ``gputui show`` prints, in order (then when it was
submitted, started and ended)."""


_TIMES = (
    ("submitted_at", N_("submitted_at")),
    ("started_at", N_("started_at")),
    ("ended_at", N_("ended_at")),
)
"""When a job was submitted, started and ended, as ``show`` labels them."""


def human(key: str, value: object, job: Answer) -> str:
    """A field of ``show`` as a person reads it: yes/no, 10m, a shell-quoted argv."""
    if value is None or value in ("", []):
        return "-" if key != "host_constraint" else _("any")
    if key == "script" and value is True:
        return _("copied at submit (argv[0] names it)")
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if key == "array_id" and isinstance(value, int):
        throttle = job.get("array_throttle")
        fields = {"label": job_label(job), "task": job.get("array_task"), "array": value}
        if isinstance(throttle, int):
            return _("{label}: task {task} of array {array} (at most {throttle} at once)").format(
                throttle=throttle, **fields
            )
        return _("{label}: task {task} of array {array}").format(**fields)
    if key == "state" and isinstance(value, str):
        return state_text(value)
    if key == "reason" and isinstance(value, str):
        return reason_text(value)
    if key == "time_limit_s" and isinstance(value, (int, float)):
        return coarse_text(float(value))
    if key == "argv" and isinstance(value, list):
        return shlex.join(str(v) for v in value)
    if key == "after" and isinstance(value, list):
        ids = ", ".join(str(v) for v in value)
        ok = job.get("after_ok") is True
        said = _("{ids} (each must complete)") if ok else _("{ids} (each must end)")
        return said.format(ids=ids)
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
        text = _("(private)") if hidden and key not in job else human(key, job.get(key), job)
        print(f"{pad(_(label), 14, right=True)}: {shown(text, 400)}")
    if job.get("preempted_by") and isinstance(job.get("preempted_at"), (int, float)):
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job["preempted_at"]))
        by = _("{who} at {time}").format(who=shown(job["preempted_by"], 200), time=at)
        print(f"{pad(_('last preempted'), 14, right=True)}: {by}")
    for key, label in _TIMES:
        print(f"{pad(_(label), 14, right=True)}: {when(job.get(key))}")
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
    from gputui.wire.words import told_text

    ask = _action(backend, a)
    code = EXIT_OK
    for target in a.job:
        job_id, task = task_ref(str(target)) or (0, None)
        try:
            if task is not None:
                answer = backend.cancel(job_id, reason=a.reason, task=task)
            else:
                answer = ask(job_id)
            job = answer["job"]
        except HeadError as exc:
            if exc.code == "unreachable":
                raise
            print(f"gputui {a.verb}: {said(exc, a.verb)}", file=sys.stderr)
            code = EXIT_REFUSED
            continue
        told = told_text(answer)
        fields = {"id": shown(job["id"]), "state": state_text(shown(job["state"]))}
        if told:
            print(_("job {id}: {state}: {told}").format(told=shown(told, 300), **fields))
        else:
            print(_("job {id}: {state}").format(**fields))
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
                mark = (
                    _("--- job {job}: run {run} (requeued) ---").format(job=a.job, run=now) + "\n"
                )
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
    why = reason_text(shown(job.get("reason") or "", 300))
    fields = {"id": shown(job["id"]), "state": state_text(shown(job["state"], 40))}
    line = _("job {id} {state}: {reason}").format(reason=why, **fields) if why else ""
    print(line or _("job {id} {state}:").format(**fields), file=sys.stderr)
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
