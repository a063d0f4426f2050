"""Starting a job: the ``launch`` request checked, then a detached supervisor spawned.

Everything a request carries is checked here, before anything is created on the
host; the supervisor (a fresh interpreter running ``supervisor``'s source) then
claims the job directory exclusively, so two launches of one job id never start
two processes. Where systemd-logind would kill a detached process at logout
(``KillUserProcesses=yes`` for a helper inside a login session), the supervisor
is started through ``systemd-run --user --scope`` instead.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import subprocess
import sys
import time
from typing import Any, Mapping, NamedTuple

from .containers import activation, check_image, check_runtime, container
from .jobfs import check_job_id, check_ns, dir_mode, file_mode
from .signals import RequestError, bad_request
from .supervisor import BOOTSTRAP, BOX, CIDFILE, SCRIPT, ActivationError, activate
from .visible import visible_env

try:
    import pwd
except ImportError:  # pragma: no cover - not Linux
    pwd = None  # type: ignore[assignment]

LAUNCH_WAIT_S = 5.0
GRACE_DEFAULT_S = 10.0
GRACE_MAX_S = 86400.0
TIME_LIMIT_MAX_S = 1e9
ARGV_MAX = 4096
ENV_MAX = 4096
GPUS_MAX = 256
SCRIPT_MAX = 256 * 1024
"""The largest submit script (``common.jobscript.MAX_SCRIPT_BYTES``)."""
USER_PATH = "/usr/local/bin:/usr/bin:/bin"
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SIM_SCOPE = "GPUTUI_SIM_SCOPE"
"""``simenv.ENV_SCOPE`` (simenv is not imported here: real mode never loads the simulator)."""
# GPU-<uuid>, MIG-<uuid>, and the older MIG-GPU-<uuid>/<gi>/<ci>: no comma, no space.
GPU_UUID_RE = re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}")
USER_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}\$?")
_SESSION_RE = re.compile(r"/session-[^/]+\.scope(/|$)")


class User(NamedTuple):
    name: str
    uid: int
    gid: int
    home: str
    shell: str


def _number(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and not math.isnan(value)
        and not math.isinf(value)
    )


def _text(value: Any, what: str, limit: int = 65536) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{what} must be a string, got {type(value).__name__}")
    if "\0" in value or len(value) > limit:
        raise bad_request(f"{what} must be a string without NUL of at most {limit} characters")
    return value


UID_MAX = 2**32 - 2


def resolve_user(name: Any, euid: int, uid: Any = None) -> tuple[User, bool]:
    """(the user, whether to switch to it): null is the helper's own user. Not root,
    the helper can only start jobs as itself. ``uid``: the uid the job belongs to;
    a name that no longer has it (moved to another account) is refused, never run
    as whoever holds the name now."""
    if uid is not None and (isinstance(uid, bool) or not isinstance(uid, int)):
        raise bad_request(f"uid must be an integer or null, got {type(uid).__name__}")
    if uid is not None and not 0 <= uid <= UID_MAX:
        raise bad_request(f"uid must be 0 to {UID_MAX}")
    if name is None:
        entry: Any = None
        if pwd is not None:
            try:
                entry = pwd.getpwuid(euid)
            except KeyError:
                entry = None
        if entry is None:
            return User(
                str(euid), euid, os.getegid(), os.environ.get("HOME", "/"), "/bin/sh"
            ), False
    else:
        if not isinstance(name, str) or not USER_RE.fullmatch(name):
            raise bad_request(f"user must be a login name or null, got {str(name)[:40]!r}")
        try:
            entry = pwd.getpwnam(name) if pwd is not None else None
        except KeyError:
            entry = None
        if entry is None:
            raise bad_request(f"no user {name!r} on this host")
        if uid is not None and entry.pw_uid != uid:
            raise RequestError(
                "user-changed",
                f"user {name} is uid {entry.pw_uid} on this host, not uid {uid} who"
                " submitted the job: not started",
            )
        if euid not in (0, entry.pw_uid):
            raise RequestError(
                "not-permitted",
                f"this helper runs as uid {euid}, not as root: it cannot start jobs as {name}",
            )
    user = User(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir or "/", entry.pw_shell)
    return user, euid == 0 and user.uid != euid


def _check_env(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > ENV_MAX:
        raise bad_request(f"env must be an object of at most {ENV_MAX} string values")
    for key, item in value.items():
        if not key or "=" in key or "\0" in key:
            raise bad_request(f"env name {key[:40]!r} is not a variable name")
        if not isinstance(item, str) or "\0" in item:
            raise bad_request(f"env value of {key[:40]!r} must be a string without NUL")
    return dict(value)


def _check_argv(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > ARGV_MAX:
        raise bad_request(f"argv must be a non-empty list of at most {ARGV_MAX} strings")
    argv = [_text(item, "each of argv") for item in value]
    if not argv[0]:
        raise bad_request("argv[0] must name a command")
    return argv


def _check_gpus(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > GPUS_MAX:
        raise bad_request(f"gpu_uuids must be a list of at most {GPUS_MAX} GPU UUIDs")
    for item in value:
        if not isinstance(item, str) or not GPU_UUID_RE.fullmatch(item):
            raise bad_request(f"gpu_uuids: {str(item)[:60]!r} is not a GPU or MIG UUID")
    return list(value)


def _check_seconds(value: Any, what: str, high: float, allow_zero: bool) -> float:
    if not _number(value) or value < 0 or (value == 0 and not allow_zero) or value > high:
        low = "0 or more" if allow_zero else "more than 0"
        raise bad_request(f"{what} must be a number of seconds, {low} and at most {high:.0f}")
    return float(value)


def job_env(
    user: User,
    extra: dict[str, str],
    gpus: list[str],
    job_id: int,
    simulated: bool,
    *,
    amd: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A minimal login environment, the request's env on top, then the job's own
    (``amd``: the host's AMD cards, see ``visible``)."""
    env = {
        "HOME": user.home,
        "USER": user.name,
        "LOGNAME": user.name,
        "PATH": ROOT_PATH if user.uid == 0 else USER_PATH,
        "SHELL": user.shell or "/bin/sh",
        "LANG": os.environ.get("LANG") or "C.UTF-8",
    }
    env.update(extra)
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        env.pop(name, None)
    env.update(visible_env(gpus, amd or {}))
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    # The head keys runs by job id and launch number and says which job this is;
    # a client that does not gets the run's own id.
    env["GPUTUI_JOB_ID"] = extra.get("GPUTUI_JOB_ID") or str(job_id)
    if simulated:
        env["GPUTUI_SIM_GPU"] = ",".join(gpus)
        # The job is this simulator's, whatever the request said (see simenv).
        env.pop(SIM_SCOPE, None)
        scope = os.environ.get(SIM_SCOPE)
        if scope:
            env[SIM_SCOPE] = scope
    return env


def parse_launch(
    req: dict[str, Any],
    root: str,
    euid: int,
    simulated: bool,
    *,
    amd: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The supervisor's spec for a ``launch`` request; RequestError for a bad one
    (``amd``: the host's AMD cards' UUIDs -> ROCm's names for them)."""
    ns = check_ns(req.get("ns"))
    job_id = check_job_id(req.get("job_id"))
    argv = _check_argv(req.get("argv"))
    env = _check_env(req.get("env", {}))
    gpus = _check_gpus(req.get("gpu_uuids", []))
    cwd = req.get("cwd")
    if cwd is not None and not os.path.isabs(_text(cwd, "cwd", 4096)):
        raise bad_request(f"cwd must be an absolute path or null, got {cwd[:60]!r}")
    limit = req.get("time_limit_s")
    if limit is not None:
        limit = _check_seconds(limit, "time_limit_s", TIME_LIMIT_MAX_S, allow_zero=False)
    grace = req.get("grace_s")
    grace = (
        GRACE_DEFAULT_S if grace is None else _check_seconds(grace, "grace_s", GRACE_MAX_S, True)
    )
    script = req.get("script")
    if script is not None:
        script = _text(script, "script", SCRIPT_MAX)
        if not script.startswith("#!") or "\x00" in script:
            raise bad_request("script must start with #! and hold no NUL byte")
        argv[0] = os.path.join(root, ns, str(job_id), SCRIPT)
    output = req.get("output")
    if output is not None:
        output = _text(output, "output", 4096)
        if not output or "\x00" in output:
            raise bad_request("output must be a file name")
    act = activation(req)
    image = req.get("image")
    if image is None and req.get("runtime") is not None:
        raise bad_request("runtime is given without an image")
    if image is not None and act is not None:
        raise bad_request(
            f"an image job cannot also activate {act['kind']}: activate it in the image"
        )
    if image is not None and amd and any(g in amd for g in gpus):
        raise bad_request("a container on AMD cards is not supported yet: run it without --image")
    interactive = req.get("pty", False)
    if not isinstance(interactive, bool):
        raise bad_request("pty must be true or false")
    idle = req.get("idle_s")
    if idle is not None:
        idle = _check_seconds(idle, "idle_s", TIME_LIMIT_MAX_S, allow_zero=False)
    user, switch = resolve_user(req.get("user"), euid, req.get("uid"))
    if cwd is None:
        cwd = user.home if os.path.isdir(user.home) else "/"
    full_env = job_env(user, env, gpus, job_id, simulated, amd=amd)
    wrapped: dict[str, Any] = {"activation": act}
    if image is not None:
        image, runtime = check_image(image), check_runtime(req.get("runtime"))
        found = which(runtime, os.environ.get("PATH") or ROOT_PATH)
        if found is None:
            raise RequestError("exec-failed", f"cannot run {runtime}: not installed on this host")
        box = container(
            runtime,
            found,
            image,
            argv,
            uid=user.uid,
            gid=user.gid,
            gpus=gpus,
            env=full_env,
            cwd=cwd,
            ns=ns,
            key=job_id,
            cidfile=os.path.join(root, ns, str(job_id), BOX, CIDFILE),
            files=(argv[0],) if script is not None else (),  # the script's copy, read-only
        )
        argv = box.argv
        full_env.update(box.env)
        wrapped["cleanup"] = box.cleanup
        wrapped["container_box"] = box.name is not None
        wrapped["container"] = {"runtime": runtime, "image": image, "name": box.name}
    return {
        **wrapped,
        "script": script,
        "output": output,
        "root": root,
        "ns": ns,
        "job_id": job_id,
        "argv": argv,
        "cwd": cwd,
        "env": full_env,
        "gpu_uuids": gpus,
        "time_limit_s": limit,
        "grace_s": grace,
        "user_name": user.name,
        "uid": user.uid,
        "gid": user.gid,
        "switch_user": switch,
        "dir_mode": dir_mode(euid),
        "file_mode": file_mode(euid),
        "method": "detached",
        "pty": interactive,
        "idle_s": idle if interactive else None,
    }


def which(command: str, path: str, cwd: str = "/") -> str | None:
    """Where ``command`` would be found by exec with this PATH (relative to ``cwd``)."""
    if "/" in command:
        full = os.path.join(cwd, command)
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    for folder in path.split(os.pathsep):
        full = os.path.join(cwd, folder or ".", command)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def precheck(spec: dict[str, Any], deadline: float | None = None) -> None:
    """The usual exec failures, caught before anything is created (the supervisor's own
    exec, as the job's user, has the last word).

    Checked as the job's user, in a child dropped to its uid, gid and groups: the
    answer says only what that user could find out, so a path under a directory they
    cannot read is "not a directory" whether or not it exists there.
    """
    if spec.get("switch_user"):
        until = deadline if deadline is not None else time.monotonic() + LAUNCH_WAIT_S
        problem = _as_user(spec, until)
    else:
        problem = _exec_problem(spec)
    if problem:
        raise RequestError("exec-failed", problem)


def _exec_problem(spec: dict[str, Any]) -> str:
    """Why the job could not be started by this process ("" when it could)."""
    cwd = spec["cwd"]
    if not os.path.isdir(cwd):
        return f"cannot enter cwd {cwd}: not a directory on this host"
    try:
        env = activate(spec["env"], spec.get("activation"))
    except ActivationError as exc:
        return str(exc)
    if spec.get("script") is not None:
        return ""  # the script's copy is written by the supervisor, then run
    command = spec["argv"][0]
    if which(command, env.get("PATH", ""), cwd) is None:
        where = "" if "/" in command else f" on PATH {env.get('PATH', '')[:200]}"
        return f"cannot run {command[:200]!r}: no such command{where}"
    return ""


def _as_user(spec: dict[str, Any], deadline: float) -> str:
    """``_exec_problem`` in a forked child that is the job's user (no exec: nothing
    the user could not read is run). The child makes only system calls, so forking
    this threaded helper is safe; a child that says nothing in time is killed and the
    supervisor's own start, as the user, decides."""
    groups = os.getgrouplist(spec["user_name"], spec["gid"])  # NSS here, not in the child
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its answer is what the tests check
        code = 1
        try:
            os.close(read_fd)
            os.setgroups(groups)
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
            os.write(write_fd, _exec_problem(spec).encode("utf-8", "replace")[:4096])
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        data = b""
        while True:
            left = deadline - time.monotonic()
            ready = select.select([read_fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                os.kill(pid, 9)
                return ""
            chunk = os.read(read_fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    return data.decode("utf-8", "replace")


class Logind:
    """Whether this helper's detached processes would die with its login session, and
    the ``systemd-run`` to escape that with (found on ``path``, default $PATH)."""

    CACHE_S = 60.0

    def __init__(self, cgroup: str = "/proc/self/cgroup", path: str | None = None) -> None:
        self.cgroup = cgroup
        self.path = path
        self.systemd_run: str | None = None
        self._cached: tuple[float, str] | None = None

    def in_session(self) -> bool:
        """Inside a logind session scope (where KillUserProcesses applies)?"""
        try:
            with open(self.cgroup, encoding="utf-8", errors="replace") as fh:
                return any(_SESSION_RE.search(line) for line in fh)
        except OSError:
            return False

    @staticmethod
    def _kills_user_processes(loginctl: str) -> bool:
        # Without a user, show-user shows the manager's properties (KillUserProcesses).
        try:
            done = subprocess.run(
                [loginctl, "show-user", "-p", "KillUserProcesses"],
                capture_output=True,
                text=True,
                timeout=3,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0 and "KillUserProcesses=yes" in done.stdout.split()

    def method(self, euid: int) -> str:
        """``systemd-run`` where logind kills what a session leaves behind, else ``detached``."""
        if euid == 0:
            return "detached"
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.CACHE_S:
            return self._cached[1]
        path = self.path if self.path is not None else os.environ.get("PATH", USER_PATH)
        method = "detached"
        if self.in_session():
            systemd_run, loginctl = which("systemd-run", path), which("loginctl", path)
            if systemd_run and loginctl and self._kills_user_processes(loginctl):
                method, self.systemd_run = "systemd-run", systemd_run
        self._cached = (now, method)
        return method


def _read_line(fd: int, deadline: float) -> bytes | None:
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0]


def start_supervisor(
    spec: dict[str, Any],
    sources: list[str],
    method: str,
    deadline: float,
    systemd_run: str | None = None,
) -> dict[str, Any] | None:
    """Spawn the supervisor; its one-line report (``outcome``), or None without one."""
    label = f"{spec['ns']}/{spec['job_id']}"
    cmd = [sys.executable or "python3", "-I", "-S", "-c", BOOTSTRAP, "gputui-supervisor", label]
    if method == "systemd-run":
        cmd = [systemd_run or "systemd-run", "--user", "--scope", "--quiet", "--", *cmd]
    payload = json.dumps({"sources": sources, "spec": dict(spec, method=method)}).encode("utf-8")
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            cwd="/",
        )
    except OSError as exc:
        raise RequestError("internal", f"cannot start the job supervisor: {exc.strerror}") from None
    assert proc.stdin is not None and proc.stdout is not None
    try:
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except OSError:
            pass  # it ended early: what it said (if anything) is on stdout
        line = _read_line(proc.stdout.fileno(), deadline)
    finally:
        proc.stdout.close()
        try:
            proc.wait(timeout=max(0.5, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()  # the first fork only: the supervisor itself is not its child
            proc.wait()
    if line is None:
        return None
    try:
        outcome = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return outcome if isinstance(outcome, dict) else None
