"""The detached job supervisor: one per job, outliving the helper, SSH and the head.

Self-contained on purpose (stdlib only, no imports of the helper's modules but
``ptyterm``, an interactive job's terminal, shipped with it): the helper runs from
memory, so it hands the two modules' source text to a fresh interpreter (see
``launch.start_supervisor``) together with the launch spec, as one JSON object on a
pipe. ``main(spec)`` detaches (setsid, fork, the first process
exits so the supervisor is reparented), claims the job directory exclusively,
starts the job in its own process group, reports one JSON line on stdout, and then
waits for the job, enforcing its time limit and recording how it ended.

Everything a reader needs is in ``<root>/<ns>/<job_id>/state.json``, replaced
atomically on each change.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import sys
import time
from typing import Any

with contextlib.suppress(ImportError):  # shipped, ``ptyterm`` runs first, in one namespace
    from .ptyterm import Terminal, killpg

NS_RE = re.compile(r"[a-z0-9]{8,32}")
JOB_ID_MAX = 1 << 53
STATE = "state.json"
STATE_TMP = "state.json.tmp"
LOG = "output.log"
BOX = "box"
"""The job's user's directory in a container job's directory: the runtime writes the
container's id into ``box/cid`` (``--cidfile``), which links its processes to the job."""
CIDFILE = "cid"
SCRIPT = "script"
ERROR_MAX = 1000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# The fixed command line's program: reads {"sources", "spec"} from stdin, runs each
# source in one namespace (``ptyterm``'s, then this module's), then main(spec).
BOOTSTRAP = (
    "import sys,json;d=json.loads(sys.stdin.buffer.read().decode('utf-8'));"
    "g={'__name__':'gputui_supervisor'};"
    "[exec(compile(s,'<gputui-supervisor>','exec'),g) for s in d['sources']];"
    "sys.exit(g['main'](d['spec']))"
)


class SetupError(Exception):
    """The job directory or its files could not be made: nothing was started."""


class ActivationError(Exception):
    """The environment the job asked for is not there: nothing was started."""


# Where conda installs live, below the user's home and system-wide; an exported
# CONDA_EXE (or MAMBA_EXE) names the user's own first.
CONDA_HOME_ROOTS = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", ".conda")
CONDA_SYSTEM_ROOTS = ("/opt/conda", "/opt/miniconda3", "/opt/anaconda3", "/opt/miniforge3")
CONDA_ENVS_LIST = ".conda/environments.txt"
CONDA_LIST_MAX = 1 << 16


def _conda_listed(home: str) -> list[str]:
    """The environment prefixes conda recorded in ``~/.conda/environments.txt``."""
    try:
        fd = os.open(os.path.join(home, CONDA_ENVS_LIST), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        data = os.read(fd, CONDA_LIST_MAX)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    return [line.strip() for line in lines if line.strip().startswith("/")]


def conda_prefix(name: str, env: dict[str, str]) -> str:
    """The prefix of conda environment ``name`` (a name, or its absolute path), found
    as the job's user would find it; ActivationError when there is none."""
    if name.startswith("/"):
        candidates = [name]
    else:
        home = env.get("HOME") or "/"
        roots = []
        for var in ("CONDA_EXE", "MAMBA_EXE"):
            exe = env.get(var, "")
            if exe.startswith("/"):
                roots.append(os.path.dirname(os.path.dirname(exe)))
        roots += [os.path.join(home, r) for r in CONDA_HOME_ROOTS] + list(CONDA_SYSTEM_ROOTS)
        dirs = [d for d in env.get("CONDA_ENVS_PATH", "").split(":") if d.startswith("/")]
        candidates = list(roots) if name == "base" else []
        candidates += [os.path.join(d, name) for d in dirs]
        candidates += [os.path.join(r, "envs", name) for r in roots]
        candidates += [p for p in _conda_listed(home) if os.path.basename(p) == name]
    for prefix in candidates:
        if ":" not in prefix and os.path.isdir(os.path.join(prefix, "conda-meta")):
            return prefix  # (a ":" would split on PATH)
    raise ActivationError(
        f"no conda environment {name!r} on this host (looked in ~/.conda/environments.txt,"
        " the envs of the usual conda installs, CONDA_ENVS_PATH and CONDA_EXE's install)"
    )


def activate(env: dict[str, str], activation: Any) -> dict[str, str]:
    """``env`` with the environment activated the way ``activate`` scripts do it for
    exec: its bin first on PATH, VIRTUAL_ENV or CONDA_PREFIX set; no shell involved."""
    if not activation:
        return env
    kind, value = activation["kind"], activation["value"]
    env = dict(env)
    env.pop("PYTHONHOME", None)
    if kind == "venv":
        if not os.path.isfile(os.path.join(value, "pyvenv.cfg")):
            raise ActivationError(f"{value} is not a virtual environment (no pyvenv.cfg there)")
        prefix = value
        env["VIRTUAL_ENV"] = prefix
    else:
        prefix = conda_prefix(value, env)
        env["CONDA_PREFIX"] = prefix
        env["CONDA_DEFAULT_ENV"] = os.path.basename(prefix) if value.startswith("/") else value
        env["CONDA_SHLVL"] = "1"
    path = env.get("PATH", "")
    env["PATH"] = os.path.join(prefix, "bin") + (":" + path if path else "")
    return env


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) from /proc/PID/stat, or None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read(4096)
    except OSError:
        return None
    fields = data[data.rfind(b")") + 1 :].split()
    try:
        return fields[0].decode("ascii", "replace"), int(fields[19])
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
            return fh.read(64).decode("ascii", "replace").strip() or None
    except OSError:
        return None


def _report(obj: dict[str, Any]) -> None:
    """Tell the helper how the launch went (one line), then let go of its pipe."""
    with contextlib.suppress(OSError):
        os.write(1, json.dumps(obj).encode("utf-8") + b"\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def _subdir(parent: int, name: str, mode: int) -> int:
    """Open (making it if missing) a directory we own, never through a symlink."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=parent)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        raise SetupError(f"{name} is not owned by this user")
    return fd


def _open_job_dir(spec: dict[str, Any]) -> int:
    root = spec["root"]
    mode = spec["dir_mode"]
    try:
        os.makedirs(root, mode, exist_ok=True)
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise SetupError(f"cannot make the jobs directory {root}: {exc.strerror}") from None
    try:
        if os.fstat(root_fd).st_uid != os.geteuid():
            raise SetupError(f"the jobs directory {root} is not owned by this user")
        ns_fd = _subdir(root_fd, spec["ns"], mode)
        try:
            return _subdir(ns_fd, str(spec["job_id"]), mode)
        finally:
            os.close(ns_fd)
    except OSError as exc:
        where = os.path.join(root, spec["ns"], str(spec["job_id"]))
        why = exc.strerror
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            why = f"{why} (a symlink or a file in the way: symlinks are never followed)"
        raise SetupError(f"cannot make the job directory {where}: {why}") from None
    finally:
        os.close(root_fd)


class Job:
    """The state file of one job, and the writes that keep it current."""

    def __init__(self, spec: dict[str, Any], dir_fd: int) -> None:
        self.spec = spec
        self.dir_fd = dir_fd
        me = os.getpid()
        stat = proc_stat(me)
        self.state: dict[str, Any] = {
            "version": 1,
            "ns": spec["ns"],
            "job_id": spec["job_id"],
            "state": "starting",
            "method": spec.get("method", "detached"),
            "user": spec.get("user_name"),
            "uid": spec.get("uid"),
            "argv": spec["argv"],
            "cwd": spec["cwd"],
            "gpu_uuids": spec.get("gpu_uuids", []),
            "container": spec.get("container"),
            "activation": spec.get("activation"),
            "time_limit_s": spec.get("time_limit_s"),
            "grace_s": spec.get("grace_s"),
            "created_at": round(time.time(), 3),
            "supervisor_pid": me,
            "supervisor_ticks": stat[1] if stat else None,
            "boot_id": boot_id(),
            "pid": None,
            "pgid": None,
            "start_ticks": None,
            "started_at": None,
            "ended_at": None,
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "pty": bool(spec.get("pty")),
            "idle_s": spec.get("idle_s"),
            "idle_out": False,
            "error": None,
        }

    def _data(self) -> bytes:
        return json.dumps(self.state, separators=(",", ":")).encode("utf-8")

    def create(self) -> bool:
        """The exclusive claim: False when this job id was launched before."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(STATE, flags, self.spec["file_mode"], dir_fd=self.dir_fd)
        except FileExistsError:
            return False
        try:
            os.write(fd, self._data())  # one write: a reader sees all of it or nothing
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def update(self, **fields: Any) -> None:
        self.state.update(fields)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(STATE_TMP, flags, self.spec["file_mode"], dir_fd=self.dir_fd)
        try:
            os.write(fd, self._data())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(STATE_TMP, STATE, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)

    def make_box(self) -> None:
        """``BOX``, the job's user's (the runtime's client runs as them)."""
        os.mkdir(BOX, 0o700, dir_fd=self.dir_fd)
        if self.spec.get("switch_user"):
            os.chown(
                BOX, self.spec["uid"], self.spec["gid"], dir_fd=self.dir_fd, follow_symlinks=False
            )

    def write_script(self) -> None:
        """The submit script's copy, the job's own (0700), never through a symlink."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(SCRIPT, flags, 0o700, dir_fd=self.dir_fd)
        try:
            if self.spec.get("switch_user"):
                os.fchown(fd, self.spec["uid"], self.spec["gid"])
            os.fchmod(fd, 0o700)
            data = self.spec["script"].encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)

    def open_log(self) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(LOG, flags, 0o600, dir_fd=self.dir_fd)
        if self.spec.get("switch_user"):
            os.fchown(fd, self.spec["uid"], self.spec["gid"])
        return fd


def _pdeathsig() -> Any:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) for the job: a killed supervisor takes its job
    along, so a job reported ``lost`` is really not running. None where unavailable."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def _child(  # noqa: PLR0917 (one call, in the forked child)
    spec: dict[str, Any], log_fd: int, err_w: int, prctl: Any, parent: int, slave: int | None
) -> None:
    """In the forked child: become the job (never returns). ``slave``: an interactive
    job's pty, its controlling terminal in a session of its own."""
    stage = "start"
    try:
        if slave is None:
            os.setpgid(0, 0)
        else:
            os.setsid()  # session and process group leader: the pgid is the pid, as above
            import fcntl
            import termios

            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for sig in (signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if spec.get("switch_user"):
            stage = f"switch to user {spec.get('user_name')}"
            os.initgroups(spec["user_name"], spec["gid"])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        if prctl is not None:
            prctl(1, signal.SIGKILL)  # after setuid, which clears it
            if os.getppid() != parent:
                os._exit(137)
        if slave is None:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
        else:
            for fd in (0, 1, 2):
                os.dup2(slave, fd)
            if slave > 2:
                os.close(slave)
        os.umask(0o022)
        env = spec["env"]
        if spec.get("activation"):
            stage = f"cannot activate {spec['activation']['kind']} {spec['activation']['value']}"
            env = activate(env, spec["activation"])
        stage = f"cannot enter cwd {spec['cwd']}"
        os.chdir(spec["cwd"])
        if spec.get("output"):
            # Opened as the job's user, in its cwd: only where that user may write.
            stage = f"cannot open the output file {spec['output']!r}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            out = os.open(spec["output"], flags, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
        stage = f"cannot run {spec['argv'][0]!r}"
        os.execvpe(spec["argv"][0], spec["argv"], env)  # noqa: S606
    except BaseException as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        try:
            os.write(err_w, (f"{stage}: {reason}").encode("utf-8", "replace")[:ERROR_MAX])
        finally:
            os._exit(127)


CLEANUP_TIMEOUT_S = 60.0


def _run_as_job_user(spec: dict[str, Any], argv: list[str], timeout: float) -> int | None:
    """Run ``argv`` as the job's user, without output; its exit status (None: it took
    longer than ``timeout`` and was killed, or could not be run)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setpgid(0, 0)
            for sig in (signal.SIGHUP, signal.SIGPIPE, signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if spec.get("switch_user"):
                os.initgroups(spec["user_name"], spec["gid"])
                os.setgid(spec["gid"])
                os.setuid(spec["uid"])
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.chdir("/")
            os.execve(argv[0], argv, spec["env"])  # noqa: S606
        finally:
            os._exit(127)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        left = deadline - time.monotonic()
        if left <= 0:
            killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        signal.sigtimedwait({signal.SIGCHLD}, min(left, 0.5))


def _clean_up(spec: dict[str, Any]) -> list[int | None] | None:
    """Remove what the job leaves outside its process group (its container): the
    ``cleanup`` commands' exit statuses, or None when there are none."""
    commands = spec.get("cleanup") or []
    if not commands:
        return None
    timeout = float(spec.get("cleanup_timeout_s") or CLEANUP_TIMEOUT_S)
    return [_run_as_job_user(spec, list(argv), timeout) for argv in commands]


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _wait(job: Job, pid: int) -> None:
    """Wait for the job, with its time limit; then record how it ended."""
    spec = job.spec
    grace = float(spec.get("grace_s") or 0.0)
    limit = spec.get("time_limit_s")
    term_at = time.monotonic() + float(limit) if limit else None
    kill_at: float | None = None
    timed_out = False
    watched = {signal.SIGCHLD, signal.SIGTERM}
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            break
        now = time.monotonic()
        if term_at is not None and now >= term_at:
            term_at, timed_out = None, True
            killpg(pid, signal.SIGTERM)
            kill_at = now + grace
        if kill_at is not None and now >= kill_at:
            kill_at = None
            killpg(pid, signal.SIGKILL)
        wakes = [t for t in (term_at, kill_at) if t is not None]
        timeout = min(wakes) - now if wakes else 3600.0
        got = signal.sigtimedwait(watched, max(0.005, min(timeout, 3600.0)))
        if got is not None and got.si_signo == signal.SIGTERM and kill_at is None:
            # The host is shutting down (or someone stops the supervisor): pass it on.
            killpg(pid, signal.SIGTERM)
            kill_at = time.monotonic() + grace
    # The leader has exited but is not reaped, so its pgid cannot be reused yet:
    # whatever it left behind in its group goes now, with the job.
    killpg(pid, signal.SIGKILL)
    _record_end(job, pid, timed_out)


def _record_end(job: Job, pid: int, timed_out: bool, **extra: Any) -> dict[str, Any]:
    """Reap the job's leader and write how it ended; the fields written."""
    _, status = os.waitpid(pid, 0)
    code: int | None = None
    name: str | None = None
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
    elif os.WIFSIGNALED(status):
        num = os.WTERMSIG(status)
        try:
            name = signal.Signals(num).name[3:]
        except ValueError:
            name = str(num)
    cleaned = _clean_up(job.spec)  # before the end is told: the GPUs are free only after it
    if cleaned is not None:
        job.state["cleanup"] = cleaned
    ended = {
        "state": "exited",
        "ended_at": round(time.time(), 3),
        "exit_code": code,
        "signal": name,
        "timed_out": timed_out,
        **extra,
    }
    job.update(**ended)
    return ended


def supervise(spec: dict[str, Any]) -> None:
    """Claim the job, start it, report, and see it to its end."""
    try:
        dir_fd = _open_job_dir(spec)
    except SetupError as exc:
        _report({"outcome": "refused", "error": str(exc)})
        return
    job = Job(spec, dir_fd)
    try:
        if not job.create():
            _report({"outcome": "already"})
            return
    except OSError as exc:
        _report({"outcome": "refused", "error": f"cannot write {STATE}: {exc.strerror}"})
        return
    try:
        what = BOX
        if spec.get("container_box"):
            job.make_box()
        what = LOG
        log_fd = job.open_log()
        if spec.get("output"):
            os.write(log_fd, f"gputui: output goes to {spec['output']} (--output)\n".encode())
        what = SCRIPT
        if spec.get("script") is not None:
            job.write_script()
    except OSError as exc:
        error = f"cannot create {what}: {exc.strerror}"
        _failed_to_start(job, error)
        return
    terminal: Terminal | None = None
    if spec.get("pty"):
        try:
            terminal = Terminal(job, log_fd)
        except OSError as exc:
            error = f"cannot make the job's terminal: {exc.strerror}"
            _failed_to_start(job, error)
            return
    prctl = _pdeathsig()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM})
    err_r, err_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        _child(spec, log_fd, err_w, prctl, parent, terminal.slave if terminal else None)
    os.close(err_w)
    if terminal is None:
        os.close(log_fd)
    else:
        terminal.child_started()
    if terminal is None:
        with contextlib.suppress(OSError):  # the child did it already (and may have exec'd)
            os.setpgid(pid, pid)
    failure = _read_all(err_r)
    os.close(err_r)
    if failure:
        os.waitpid(pid, 0)
        if terminal is not None:
            terminal.close()
        error = failure.decode("utf-8", "replace")
        _failed_to_start(job, error)
        return
    stat = proc_stat(pid)
    job.update(
        state="running",
        pid=pid,
        pgid=pid,
        start_ticks=stat[1] if stat else None,
        started_at=round(time.time(), 3),
    )
    _report({"outcome": "started"})
    if terminal is not None:
        terminal.serve(
            pid, lambda why: _record_end(job, pid, why == "time", idle_out=why == "idle")
        )
    else:
        _wait(job, pid)


def _valid(spec: Any) -> bool:
    if not isinstance(spec, dict):
        return False
    job_id = spec.get("job_id")
    return (
        isinstance(spec.get("ns"), str)
        and bool(NS_RE.fullmatch(spec["ns"]))
        and isinstance(job_id, int)
        and not isinstance(job_id, bool)
        and 1 <= job_id <= JOB_ID_MAX
        and isinstance(spec.get("root"), str)
        and os.path.isabs(spec["root"])
        and isinstance(spec.get("argv"), list)
        and bool(spec["argv"])
    )


def _failed_to_start(job: Job, error: str) -> None:
    """Record that the job never started, and why, and tell the helper so."""
    job.update(state="failed-to-start", error=error, ended_at=round(time.time(), 3))
    _report({"outcome": "failed", "error": error})


def main(spec: Any) -> int:
    """Entry point in the fresh interpreter: detach, then supervise (in the grandchild)."""
    if not _valid(spec):
        _report({"outcome": "refused", "error": "malformed launch spec"})
        return 2
    with contextlib.suppress(OSError):  # already a session leader (a new session)
        os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if os.fork() != 0:
        os._exit(0)  # the helper reaps this one; the supervisor goes to init
    os.chdir("/")
    os.umask(0o022 if os.geteuid() == 0 else 0o077)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 2)
    os.close(null)
    try:
        supervise(spec)
    except BaseException as exc:  # never a traceback on a pipe nobody reads
        _report({"outcome": "refused", "error": (f"{type(exc).__name__}: {exc}")[:500]})
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover - run by hand: spec on stdin
    sys.exit(main(json.loads(sys.stdin.buffer.read().decode("utf-8"))))
