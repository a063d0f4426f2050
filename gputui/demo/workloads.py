"""Real processes that pose as GPU jobs on simulated GPUs.

The simulator puts any process whose environment names a simulated GPU
(``GPUTUI_SIM_GPU``) on that GPU, so the demo starts a few small Python loops that
sleep and burn a little CPU, with command lines like ``python - train.py --model
resnet50``. As root, some run as other unprivileged users so the grid shows
several owners; signalling them from the console is the real thing.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gputui.remote.sim.env import ENV_SCOPE

# Read from stdin (``python -``), so the command line stays short and readable.
# Each loop ends itself once the demo that started it is gone (its parent changes),
# however the demo ended: quit, a closed terminal, or kill -9.
LOOP_SCRIPT = b"""
import os, time
parent = int(os.environ["GPUTUI_DEMO_PID"])
while os.getppid() == parent:
    end = time.monotonic() + 0.01
    while time.monotonic() < end:
        pass
    time.sleep(0.5)
"""

JOBS: tuple[tuple[str, ...], ...] = (
    ("train.py", "--model", "resnet50", "--batch", "256"),
    ("finetune.py", "--base", "llama-7b", "--lora", "16"),
    ("serve.py", "--port", "8000", "--model", "mistral-7b"),
    ("train.py", "--model", "vit-b16", "--epochs", "90"),
    ("eval.py", "--ckpt", "runs/42/best.pt"),
    ("diffusion.py", "--steps", "50", "--res", "1024"),
)


@dataclass(frozen=True, slots=True)
class Workload:
    """A started workload: what it claims to be and where."""

    pid: int
    user: str
    host: str
    gpu_uuid: str
    gpu_index: int
    argv: tuple[str, ...]
    process: subprocess.Popen[bytes]


def _world_runnable(path: str) -> bool:
    """Whether any user can run ``path`` (every directory on the way searchable)."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(p.stat().st_mode & stat.S_IXOTH for p in real.parents)
    except OSError:
        return False


def python_for_everyone() -> str | None:
    """A Python interpreter other users can execute, or None."""
    candidates = [sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3"]
    candidates.append(shutil.which("python3") or "")
    for candidate in candidates:
        if candidate and _world_runnable(candidate):
            return candidate
    return None


def workload_owners() -> list[str]:
    """The current user, plus ``nobody`` and ``daemon`` when we may become them."""
    me = pwd.getpwuid(os.getuid()).pw_name
    owners = [me]
    if os.geteuid() == 0 and python_for_everyone() is not None:
        for name in ("nobody", "daemon"):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                owners.append(name)
    return owners


def start_workload(
    *,
    host: str,
    gpu_uuid: str,
    gpu_index: int,
    job: tuple[str, ...],
    user: str,
    mem_mib: int,
    util: int,
    scope: str | None = None,
) -> Workload:
    """Start one looping process on ``gpu_uuid`` of simulated ``host`` as ``user``,
    seen by the simulators of ``scope`` (default: this process's; see simenv)."""
    me = pwd.getpwuid(os.getuid()).pw_name
    python = sys.executable
    kwargs: dict[str, object] = {}
    if user != me:
        entry = pwd.getpwnam(user)
        python = python_for_everyone() or sys.executable
        kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/",
        "GPUTUI_SIM_GPU": gpu_uuid,
        "GPUTUI_SIM_MEM_MIB": str(mem_mib),
        "GPUTUI_SIM_UTIL": str(util),
        # The demo's pid, given rather than read at start: a demo that died before
        # the loop began must still end it.
        "GPUTUI_DEMO_PID": str(os.getpid()),
    }
    scope = scope or os.environ.get(ENV_SCOPE)
    if scope:  # the demo's own simulators' (see simenv)
        env[ENV_SCOPE] = scope
    argv = ("python", "-", *job)
    proc = subprocess.Popen(  # fixed argv, no shell
        list(argv),
        executable=python,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd="/",
        start_new_session=True,
        **kwargs,  # type: ignore[call-overload]
    )
    assert proc.stdin is not None
    proc.stdin.write(LOOP_SCRIPT)
    proc.stdin.close()
    return Workload(proc.pid, user, host, gpu_uuid, gpu_index, argv, proc)


def stop_workloads(workloads: list[Workload], grace: float = 1.0) -> None:
    """TERM, then KILL what is left after ``grace`` seconds; reap everything."""
    for w in workloads:
        if w.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(w.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for w in workloads:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            w.process.wait(remaining)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(w.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.process.wait(5)
