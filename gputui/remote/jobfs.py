"""Where supervised jobs live on a host, and how the helper reads them back.

``<root>/<ns>/<job_id>/state.json`` is written by the job's supervisor only (see
``supervisor``); ``output.log`` next to it is the job's stdout and stderr. The
helper only reads them, and keeps ``<root>/<ns>/forgotten`` (job ids, one a line,
appended) for ``jobs_forget``: a forgotten job keeps its directory, so launching
its id again still starts nothing. Names are checked before any path is built, and
every directory below the root is opened without following symlinks.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import threading
import time
from typing import Any, Iterable, Mapping

from .signals import RequestError
from .supervisor import BOX, CIDFILE, JOB_ID_MAX, LOG, NS_RE, STATE, boot_id, proc_stat

STATES = ("starting", "running", "exited", "failed-to-start", "lost")
ACTIVE = ("starting", "running")
FINAL = ("exited", "failed-to-start", "lost")
LIST_MAX = 4096
# A full list stays well under the client's 4 MiB line limit: 4096 x (~300 + 300 bytes).
ERROR_MAX = 300
FORGOTTEN = "forgotten"
ROOT_AS_ROOT = "/var/lib/gputui/jobs"
STATE_MAX = 1 << 20
CONTAINER_ID_RE = re.compile(r"[0-9a-f]{64}")
UNREADABLE_AFTER_S = 10.0
_CACHE_MAX = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LOST_ERROR = (
    "the job's supervisor is gone without recording an end (host rebooted or supervisor"
    " killed): the job is not running"
)


def jobs_root(environ: Mapping[str, str] | None = None, euid: int | None = None) -> str:
    """``GPUTUI_JOBS_ROOT``, else the system directory as root, else the XDG state dir."""
    env = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    override = env.get("GPUTUI_JOBS_ROOT")
    if override:
        return os.path.abspath(override)
    if euid == 0:
        return ROOT_AS_ROOT
    base = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gputui", "jobs")


def dir_mode(euid: int) -> int:
    """As root, users may read their own logs below the root: 0755; else 0700."""
    return 0o755 if euid == 0 else 0o700


def file_mode(euid: int) -> int:
    return 0o644 if euid == 0 else 0o600


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_ns(value: Any) -> str:
    if not isinstance(value, str) or not NS_RE.fullmatch(value):
        raise RequestError(
            "bad-request",
            f"ns must be 8 to 32 lowercase letters or digits, got {str(value)[:40]!r}",
        )
    return value


def check_job_id(value: Any, field: str = "job_id") -> int:
    if not _is_int(value) or not 1 <= value <= JOB_ID_MAX:
        raise RequestError(
            "bad-request", f"{field} must be an integer from 1 to 2**53, got {str(value)[:40]!r}"
        )
    return int(value)


def check_job_ids(value: Any, allow_null: bool) -> list[int] | None:
    if value is None and allow_null:
        return None
    if not isinstance(value, list) or len(value) > LIST_MAX:
        what = "a list" + (" or null" if allow_null else "")
        raise RequestError("bad-request", f"job_ids must be {what} of at most {LIST_MAX} ids")
    seen: dict[int, None] = {}
    for item in value:
        seen[check_job_id(item, "each of job_ids")] = None
    return list(seen)


def _opt_int(value: Any, low: int = 0, high: int = 1 << 62) -> int | None:
    return int(value) if _is_int(value) and low <= value <= high else None


def _opt_num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _opt_str(value: Any, limit: int = 2000) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def supervisor_alive(raw: Mapping[str, Any]) -> bool:
    """Is the supervisor that wrote ``raw`` still running (same boot, pid, start time)?"""
    recorded = raw.get("boot_id")
    if recorded and recorded != boot_id():
        return False
    pid = _opt_int(raw.get("supervisor_pid"), 1)
    if pid is None:
        return False
    found = proc_stat(pid)
    if found is None or found[0] in ("Z", "X"):
        return False
    ticks = raw.get("supervisor_ticks")
    return ticks is None or found[1] == ticks


class JobStore:
    """Reads jobs under one root; final states are cached (they never change)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.lock = threading.Lock()
        self._final: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
        self._forgotten: dict[str, tuple[int, int, frozenset[int]]] = {}

    def log_path(self, ns: str, job_id: int) -> str:
        return os.path.join(self.root, ns, str(job_id), LOG)

    # -- opening ---------------------------------------------------------------------

    def _open_ns(self, ns: str) -> int | None:
        try:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return os.open(ns, _DIR_FLAGS, dir_fd=root_fd)
        except OSError:
            return None
        finally:
            os.close(root_fd)

    @staticmethod
    def _open_job(ns_fd: int, job_id: int) -> int | None:
        try:
            return os.open(str(job_id), _DIR_FLAGS, dir_fd=ns_fd)
        except OSError:
            return None

    @staticmethod
    def _container_id(job_fd: int) -> str | None:
        """The container's id (12 hex, as ``procs.read_container`` and ``docker ps``
        show it) from ``box/cid``, which the runtime wrote as the job's user: read
        without following a link, only from a regular file, only 64 hex digits."""
        try:
            box = os.open(BOX, _DIR_FLAGS, dir_fd=job_fd)
        except OSError:
            return None
        try:
            fd = os.open(CIDFILE, _FILE_FLAGS, dir_fd=box)
        except OSError:
            return None
        finally:
            os.close(box)
        try:
            data = os.read(fd, 128) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            data = b""
        finally:
            os.close(fd)
        text = data.decode("ascii", "replace").strip()
        return text[:12] if CONTAINER_ID_RE.fullmatch(text) else None

    @staticmethod
    def _read_raw(job_fd: int) -> dict[str, Any] | None:
        """state.json as written; a file caught mid-write reads as ``starting``."""
        try:
            fd = os.open(STATE, _FILE_FLAGS, dir_fd=job_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            data = os.read(fd, STATE_MAX) if stat.S_ISREG(st.st_mode) else b""
        except OSError:
            data, st = b"", None
        finally:
            os.close(fd)
        try:
            raw = json.loads(data.decode("utf-8"))
            if isinstance(raw, dict):
                return raw
        except (ValueError, RecursionError):
            pass
        age = time.time() - st.st_mtime if st is not None else 1e9
        if age > UNREADABLE_AFTER_S:
            return {"state": "lost", "error": "the job's state file is unreadable"}
        return {"state": "starting"}

    # -- one job -----------------------------------------------------------------------

    def _job(
        self, ns: str, ns_fd: int, job_id: int, inode: int | None = None, fresh: bool = False
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(JobState, the raw state file) of one job, or None when it does not exist.
        A final state may come from the cache, with the JobState as its raw file too,
        unless ``fresh``."""
        key = (ns, job_id)
        cached = None if fresh else self._final.get(key)
        if cached is not None and inode is not None and cached[0] == inode:
            return cached[1], cached[1]
        job_fd = self._open_job(ns_fd, job_id)
        if job_fd is None:
            return None
        try:
            inode = os.fstat(job_fd).st_ino
            if cached is not None and cached[0] == inode:
                return cached[1], cached[1]
            raw = self._read_raw(job_fd)
            if raw is None:
                return None
            box = self._container_id(job_fd) if raw.get("container") else None
            state = str(raw["state"]) if raw.get("state") in STATES else "lost"
            error = _opt_str(raw.get("error"))
            if state in ACTIVE and "supervisor_pid" in raw and not supervisor_alive(raw):
                again = self._read_raw(job_fd)  # it may have written its end, then exited
                if again is not None and again.get("state") in FINAL:
                    raw = again
                    state, error = str(raw["state"]), _opt_str(raw.get("error"))
                else:
                    state, error = "lost", LOST_ERROR
        finally:
            os.close(job_fd)
        public = self._public(ns, job_id, raw, state, error)
        if box is not None:
            public["container_id"] = box
        if state in FINAL:
            if len(self._final) >= _CACHE_MAX:
                self._final.clear()
            self._final[key] = (inode, public)
        return public, raw

    def _public(
        self, ns: str, job_id: int, raw: Mapping[str, Any], state: str, error: str | None
    ) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "state": state,
            "pid": _opt_int(raw.get("pid"), 1),
            "start_ticks": _opt_int(raw.get("start_ticks")),
            "exit_code": _opt_int(raw.get("exit_code"), 0, 255),
            "signal": _opt_str(raw.get("signal"), 16),
            "started_at": _opt_num(raw.get("started_at")),
            "ended_at": _opt_num(raw.get("ended_at")),
            "timed_out": raw.get("timed_out") is True,
            "idle_out": raw.get("idle_out") is True,
            "pty": raw.get("pty") is True,
            "log_path": self.log_path(ns, job_id),
            "error": error[:ERROR_MAX] if error else error,
        }

    def get(self, ns: str, job_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(JobState, raw state file) of one job, forgotten or not; None if unknown."""
        ns_fd = self._open_ns(ns)
        if ns_fd is None:
            return None
        try:
            with self.lock:
                return self._job(ns, ns_fd, job_id, fresh=True)
        finally:
            os.close(ns_fd)

    # -- lists ---------------------------------------------------------------------

    def _forgotten_ids(self, ns: str, ns_fd: int) -> frozenset[int]:
        try:
            fd = os.open(FORGOTTEN, _FILE_FLAGS, dir_fd=ns_fd)
        except OSError:
            return frozenset()
        try:
            st = os.fstat(fd)
            cached = self._forgotten.get(ns)
            if cached is not None and cached[:2] == (st.st_ino, st.st_size):
                return cached[2]
            data = os.read(fd, 64 << 20) if stat.S_ISREG(st.st_mode) else b""
        finally:
            os.close(fd)
        ids = frozenset(int(x) for x in data.split() if x.isdigit() and len(x) <= 16)
        self._forgotten[ns] = (st.st_ino, st.st_size, ids)
        return ids

    def _entries(self, ns: str, ns_fd: int) -> list[tuple[int, int]]:
        """(job id, inode) of the not-forgotten jobs, the newest LIST_MAX, oldest first."""
        forgotten = self._forgotten_ids(ns, ns_fd)
        found = []
        with os.scandir(ns_fd) as it:
            for entry in it:
                name = entry.name
                if not name.isdigit() or name[0] == "0" or len(name) > 16:
                    continue
                job_id = int(name)
                if job_id > JOB_ID_MAX or job_id in forgotten:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    found.append((job_id, entry.inode()))
        found.sort()
        return found[-LIST_MAX:]

    def jobs(self, ns: str, job_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """JobStates: of ``job_ids`` (unknown ones left out), or every job not forgotten."""
        ns_fd = self._open_ns(ns)
        if ns_fd is None:
            return []
        try:
            with self.lock:
                if job_ids is None:
                    wanted: list[tuple[int, int | None]] = list(self._entries(ns, ns_fd))
                else:
                    wanted = [(job_id, None) for job_id in job_ids]
                jobs = []
                for job_id, inode in wanted:
                    found = self._job(ns, ns_fd, job_id, inode)
                    if found is not None:
                        jobs.append(found[0])
                return jobs
        finally:
            os.close(ns_fd)

    def forget(self, ns: str, job_ids: list[int], mode: int) -> list[int]:
        """Hide ended jobs from ``jobs``; a job still starting or running is kept."""
        ns_fd = self._open_ns(ns)
        if ns_fd is None:
            return []
        try:
            with self.lock:
                done = []
                for job_id in job_ids:
                    found = self._job(ns, ns_fd, job_id)
                    if found is not None and found[0]["state"] in FINAL:
                        done.append(job_id)
                new = [j for j in done if j not in self._forgotten_ids(ns, ns_fd)]
                if new:
                    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                    fd = os.open(FORGOTTEN, flags, mode, dir_fd=ns_fd)
                    try:
                        os.write(fd, "".join(f"{j}\n" for j in new).encode("ascii"))
                    finally:
                        os.close(fd)
                return done
        finally:
            os.close(ns_fd)

    # -- logs ------------------------------------------------------------------------

    def read_log(self, ns: str, job_id: int, offset: int, max_bytes: int) -> dict[str, Any]:
        ns_fd = self._open_ns(ns)
        found = None
        job_fd: int | None = None
        if ns_fd is not None:
            try:
                with self.lock:
                    found = self._job(ns, ns_fd, job_id)
                job_fd = self._open_job(ns_fd, job_id) if found is not None else None
            finally:
                os.close(ns_fd)
        if found is None:
            raise RequestError("unknown-job", f"no job {job_id} in namespace {ns}")
        final = found[0]["state"] in FINAL  # read before the size: a final log is complete
        data, size = b"", 0
        if job_fd is not None:
            try:
                fd = os.open(LOG, _FILE_FLAGS, dir_fd=job_fd)
            except OSError:
                fd = -1
            finally:
                os.close(job_fd)
            if fd >= 0:
                try:
                    st = os.fstat(fd)
                    if stat.S_ISREG(st.st_mode):
                        size = st.st_size
                        data = os.pread(fd, max_bytes, min(offset, size))
                finally:
                    os.close(fd)
        start = min(offset, size)
        if start + len(data) < size or not final:
            data = whole_characters(data)
        end = start + len(data)
        return {
            "job_id": job_id,
            "data": data.decode("utf-8", errors="replace"),
            "offset": end,
            "size": size,
            "ended": final and end >= size,
        }


def whole_characters(data: bytes) -> bytes:
    """``data`` without a UTF-8 sequence cut at its end (the next read starts with it)."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        byte = data[n - back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if back < need and n - back > 0:
                return data[: n - back]
        return data
    return data
