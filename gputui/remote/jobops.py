"""The job requests (``launch``, ``jobs``, ``job_signal``, ``job_log``, ``jobs_forget``)
and the ``jobs`` push of ``--jobs NS``.

They run on the helper's worker threads (see ``dispatch``), never on the sampling
loop: a launch can wait seconds for an exec, a listing reads many files.
"""

from __future__ import annotations

import os
import signal as _signal
import threading
import time
from typing import Any, Callable

from .jobfs import (
    JobStore,
    check_job_id,
    check_job_ids,
    check_ns,
    file_mode,
    jobs_root,
)
from .launch import LAUNCH_WAIT_S, Logind, parse_launch, precheck, start_supervisor
from .procs import read_start_ticks
from .signals import RequestError
from .wire import OutputClosed

JOB_SIGNALS = {
    "TERM": _signal.SIGTERM,
    "KILL": _signal.SIGKILL,
    "INT": _signal.SIGINT,
    "HUP": _signal.SIGHUP,
}
LOG_READ_MAX = 65536
WATCH_INTERVAL_S = 0.2
_POLL_S = 0.02

_SOURCES: list[str] | None = None


def _source_of(module: Any) -> str:
    """A module's text, whether this helper runs from files or from memory (the
    bundle's import hook answers ``get_source`` like a file loader does)."""
    text: str | None = None
    getter = getattr(getattr(module, "__loader__", None), "get_source", None)
    if getter is not None:
        try:
            text = getter(module.__name__)
        except (ImportError, OSError):
            text = None
    if not text and getattr(module, "__file__", None):
        try:
            with open(module.__file__, encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            text = None
    if not text:
        raise RequestError("internal", "the job supervisor's source is not available")
    return text


def supervisor_sources() -> list[str]:
    """What a supervisor runs, in order: ``ptyterm`` (an interactive job's terminal),
    then ``supervisor`` itself."""
    global _SOURCES
    if _SOURCES is None:
        from . import ptyterm, supervisor

        _SOURCES = [_source_of(ptyterm), _source_of(supervisor)]
    return _SOURCES


class JobService:
    """One helper's job requests, against the jobs root of this host."""

    def __init__(
        self,
        simulated: bool,
        root: str | None = None,
        euid: int | None = None,
        logind: Logind | None = None,
    ) -> None:
        self.simulated = simulated
        self.euid = os.geteuid() if euid is None else euid
        self.root = root or jobs_root(euid=self.euid)
        self.store = JobStore(self.root)
        self.logind = logind or Logind()
        self.amd_cards: dict[str, str] = {}
        """The host's AMD cards: UUID -> ``ROCR_VISIBLE_DEVICES`` name (the helper's)."""

    # -- launch --------------------------------------------------------------------

    def _answer(
        self, ns: str, job_id: int, already: bool, method: str, deadline: float
    ) -> dict[str, Any]:
        """The job's state once it is no longer ``starting`` (or the deadline passed)."""
        while True:
            found = self.store.get(ns, job_id)
            if found is None:
                raise RequestError("internal", f"job {job_id} vanished while starting")
            public, raw = found
            if public["state"] != "starting" or time.monotonic() >= deadline:
                break
            threading.Event().wait(_POLL_S)
        recorded = raw.get("method")
        used = recorded if recorded in ("detached", "systemd-run") else method
        return dict(public, already=already, method=used)

    def launch(self, req: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + LAUNCH_WAIT_S
        spec = parse_launch(req, self.root, self.euid, self.simulated, amd=self.amd_cards)
        ns, job_id = spec["ns"], spec["job_id"]
        if self.store.get(ns, job_id) is not None:
            return self._answer(ns, job_id, True, "detached", deadline)
        precheck(spec, deadline)
        method = self.logind.method(self.euid)
        source, systemd_run = supervisor_sources(), self.logind.systemd_run
        outcome = start_supervisor(spec, source, method, deadline, systemd_run)
        if outcome is None and method != "detached" and self.store.get(ns, job_id) is None:
            method = "detached"  # no scope to be had (no user manager): the plain way
            outcome = start_supervisor(spec, source, method, deadline)
        kind = outcome.get("outcome") if outcome else None
        error = str((outcome or {}).get("error") or "")[:1000]
        if kind == "failed":
            raise RequestError("exec-failed", error or "the job could not be started")
        if kind == "refused":
            raise RequestError("internal", error or "the supervisor refused the launch")
        if kind not in ("started", "already") and self.store.get(ns, job_id) is None:
            raise RequestError("internal", "the job supervisor ended without a word")
        return self._answer(ns, job_id, kind == "already", method, deadline)

    # -- the others ------------------------------------------------------------------

    def jobs(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = check_ns(req.get("ns"))
        job_ids = check_job_ids(req.get("job_ids"), allow_null=True)
        return {"jobs": self.store.jobs(ns, job_ids)}

    def jobs_forget(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = check_ns(req.get("ns"))
        job_ids = check_job_ids(req.get("job_ids"), allow_null=False) or []
        return {"forgotten": self.store.forget(ns, job_ids, file_mode(self.euid))}

    def job_log(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = check_ns(req.get("ns"))
        job_id = check_job_id(req.get("job_id"))
        offset, limit = req.get("offset", 0), req.get("max_bytes", LOG_READ_MAX)
        if not _nonneg_int(offset):
            raise RequestError("bad-request", "offset must be a non-negative integer")
        if not _nonneg_int(limit) or not 1 <= limit <= LOG_READ_MAX:
            raise RequestError("bad-request", f"max_bytes must be an integer 1..{LOG_READ_MAX}")
        return self.store.read_log(ns, job_id, min(offset, 1 << 62), limit)

    def job_signal(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = check_ns(req.get("ns"))
        job_id = check_job_id(req.get("job_id"))
        name = req.get("signal")
        if name not in JOB_SIGNALS:
            got = str(name)[:20]
            raise RequestError(
                "bad-request", f"signal must be one of TERM, KILL, INT, HUP, got {got!r}"
            )
        grace = req.get("grace_s")
        if grace is not None and (
            isinstance(grace, bool)
            or not isinstance(grace, (int, float))
            or not 0 <= grace <= 86400
        ):
            raise RequestError("bad-request", "grace_s must be null or 0..86400 seconds")
        found = self.store.get(ns, job_id)
        if found is None:
            raise RequestError("unknown-job", f"no job {job_id} in namespace {ns}")
        public, raw = found
        if name == "TERM" and public.get("pty"):
            # A shell at a terminal ignores SIGTERM: it leaves on SIGHUP, as when its
            # terminal closes (a kill, a preemption or a cancel of an interactive job).
            _signal_job(public, raw, _signal.SIGHUP)
        delivered = _signal_job(public, raw, JOB_SIGNALS[name])
        if delivered and name == "TERM" and grace is not None:
            timer = threading.Timer(
                float(grace), self._escalate, (ns, job_id, public["pid"], public["start_ticks"])
            )
            timer.daemon = True
            timer.start()
        return dict(public, delivered=delivered)

    def _escalate(self, ns: str, job_id: int, pid: int, ticks: int) -> None:
        """KILL after the grace of a TERM, if the very same job is still running."""
        found = self.store.get(ns, job_id)
        if found is not None and (found[0]["pid"], found[0]["start_ticks"]) == (pid, ticks):
            _signal_job(found[0], found[1], _signal.SIGKILL)

    # -- the push ----------------------------------------------------------------------

    def watch(
        self,
        ns: str,
        send: Callable[[dict[str, Any]], None],
        stop: threading.Event,
        last: list[dict[str, Any]] | None = None,
    ) -> None:
        """Send the namespace's full job list whenever it differs from ``last`` (the
        list already sent), checking every WATCH_INTERVAL_S."""
        while True:
            try:
                jobs = self.store.jobs(ns)
            except OSError:
                jobs = last or []
            if jobs != last:
                try:
                    send({"type": "jobs", "jobs": jobs})
                except OutputClosed:
                    return
                last = jobs
            if stop.wait(WATCH_INTERVAL_S):
                return


def _nonneg_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _signal_job(public: dict[str, Any], raw: dict[str, Any], signum: int) -> bool:
    """Signal the job's process group, if its leader is still the process started."""
    if public["state"] != "running":
        return False
    pid, pgid, ticks = public["pid"], raw.get("pgid"), public["start_ticks"]
    if pid is None or ticks is None or pgid != pid:
        return False
    if read_start_ticks(pid) != ticks:
        return False
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        raise RequestError("not-permitted", f"permission denied signalling job pid {pid}") from None
    return True
