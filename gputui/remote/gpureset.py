"""How the helper resets one GPU: one interface, two implementations.

``NvmlReset`` calls ``nvmlDeviceResetGpu`` through the guarded NVML path; only the
simulator has that call (nvidia-ml-py has none). ``SmiReset`` is what a real host
does, the way NVIDIA documents it: ``nvidia-smi --gpu-reset -i <uuid>``, which needs
root, no process on the card, and (on some systems) the card's NVLink peers idle.

``SmiReset`` runs the ``nvidia-smi`` that ``shutil.which`` finds on ``SEARCH_PATH``
(fixed, never the caller's ``PATH``), only when it and its directory belong to root
and no one else may write them; as an argv list (never a shell), in its own session
with a small fixed environment, under a timeout (the request's ``timeout_s``, within
``MIN_TIMEOUT_S``..``MAX_TIMEOUT_S``; it is killed when it runs past it). Its output
is read to the end, the first ``OUTPUT_CAP`` bytes kept, and returned as one clean
line. Just before it runs, the card is checked again: no other process holds its
device file, and NVML lists no process on it. Each implementation answers the
``reset`` result: ``reset``, ``error`` (why not), ``message``, ``via``, and after a
reset what NVML then reads (``mem_used_mib``, ``processes``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
from typing import Any, Callable, Union

from .gpus import Gpu, GpuLost
from .holders import scan_holders
from .nvml import NA
from .procs import PROC
from .signals import RequestError

SEARCH_PATH = "/usr/bin:/usr/sbin:/bin:/sbin:/usr/local/bin:/usr/local/sbin"
"""Where ``nvidia-smi`` is looked for (a test points it at a fake)."""
# The client's wire (``gputui.wire.ops``) keeps its own copy of these three; a
# test holds them equal.
DEFAULT_TIMEOUT_S = 60.0
MIN_TIMEOUT_S = 0.1
MAX_TIMEOUT_S = 600.0
OUTPUT_CAP = 4096
"""Bytes of ``nvidia-smi``'s output kept (the rest is read and dropped)."""
LINE_CELLS = 300
"""The one line returned: at most this many characters."""
_READ_CHUNK = 65536
_REAPED_S = 5.0
_SHOWN = 4

# nvidia-smi's documented return values.
EXIT_MEANINGS: dict[int, str] = {
    2: "invalid argument",
    3: "not available on this card",
    4: "no permission",
    6: "the operation failed",
    8: "external power cables not attached",
    9: "NVIDIA driver not loaded",
    10: "the kernel detected an interrupt issue with the GPU",
    12: "NVML library not found",
    13: "NVML does not implement this",
    14: "infoROM corrupted",
    15: "the GPU has fallen off the bus",
    255: "other error or internal driver error",
}

_ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|.?)"
    r"|\x9b[0-?]*[ -/]*[@-~]",
    re.DOTALL,
)
_SPACES = re.compile(r"\s+")


def timeout_from(req: dict[str, Any]) -> float:
    """The request's ``timeout_s`` (seconds the reset may take), checked."""
    value = req.get("timeout_s", DEFAULT_TIMEOUT_S)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S
    ):
        raise RequestError(
            "bad-request",
            f"timeout_s must be seconds {MIN_TIMEOUT_S:g}-{MAX_TIMEOUT_S:g}, "
            f"got {str(value)[:20]!r}",
        )
    return float(value)


def one_line(data: bytes, cells: int = LINE_CELLS) -> str:
    """Output bytes as one display-safe line: escapes and control characters gone,
    its non-empty lines joined with `` / ``, at most ``cells`` characters."""
    text = data.decode("utf-8", errors="replace")
    text = _ESCAPES.sub("", text)
    lines = []
    for raw in text.splitlines():
        kept = "".join(c if c.isprintable() else " " for c in raw)
        kept = _SPACES.sub(" ", kept).strip()
        if kept:
            lines.append(kept)
    return _cut(" / ".join(lines), cells)


def _cut(line: str, cells: int = LINE_CELLS) -> str:
    return line if len(line) <= cells else line[: cells - 1] + "…"


def _after(gpu: Gpu) -> dict[str, Any]:
    """What NVML reads of the card after a reset: memory used and processes on it."""
    pids = gpu.pids()
    try:
        used = gpu.memory_used_mib()
    except GpuLost:
        used = None
    return {"mem_used_mib": used, "processes": None if pids is None else len(pids)}


def _answer(via: str, reset: bool, error: str | None, message: str) -> dict[str, Any]:
    return {
        "via": via,
        "reset": reset,
        "error": error,
        "message": _cut(message),
        "mem_used_mib": None,
        "processes": None,
    }


class NvmlReset:
    """``nvmlDeviceResetGpu``: the simulator's reset (a real binding has no such call)."""

    via = "nvml"

    def reset(self, gpu: Gpu, timeout_s: float, minor: int = -1) -> dict[str, Any]:
        try:
            answer = gpu.read("nvmlDeviceResetGpu")
        except GpuLost:
            raise RequestError("not-readable", f"GPU {gpu.index} is lost: not reset") from None
        if isinstance(answer, NA):
            return _answer(self.via, False, answer.error, one_line(answer.message.encode()))
        return {**_answer(self.via, True, None, ""), **_after(gpu)}


def _trusted(path: str) -> str | None:
    """Why ``path`` (already resolved) must not run as root, or None when it may."""
    for where in (path, os.path.dirname(path)):
        try:
            st = os.stat(where)
        except OSError as exc:
            return f"{where}: {exc.strerror}"
        if st.st_uid != 0:
            return f"{where} is not owned by root"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{where} is writable by others than root"
    return None


class SmiReset:
    """``nvidia-smi --gpu-reset -i <uuid>``: a real host's reset.

    ``search_path``, ``euid``, ``owner_check``, ``proc`` and ``dev`` are parameters so a
    test can run a fake ``nvidia-smi`` it wrote, as if root, against a tree it built."""

    via = "nvidia-smi"

    def __init__(
        self,
        search_path: str | None = None,
        euid: Callable[[], int] = os.geteuid,
        owner_check: Callable[[str], str | None] = _trusted,
        proc: str = PROC,
        dev: str = "/dev",
    ) -> None:
        self.search_path = search_path
        self.euid = euid
        self.owner_check = owner_check
        self.proc = proc
        self.dev = dev

    def find(self) -> str:
        """The absolute path of the ``nvidia-smi`` to run; ``ValueError`` says why
        there is none."""
        where = self.search_path if self.search_path is not None else SEARCH_PATH
        found = shutil.which("nvidia-smi", path=where)
        if found is None:
            raise ValueError(f"nvidia-smi not found in {where}")
        path = os.path.realpath(found)
        why = self.owner_check(path)
        if why is not None:
            raise ValueError(f"{found} not run: {why}")
        return path

    def reset(self, gpu: Gpu, timeout_s: float, minor: int = -1) -> dict[str, Any]:
        try:
            smi = self.find()
        except ValueError as exc:
            return _answer(self.via, False, "nvidia-smi-missing", str(exc))
        if self.euid() != 0:
            return _answer(
                self.via, False, "not-root", "nvidia-smi --gpu-reset needs root: the helper is not"
            )
        self._still_idle(gpu, minor if minor >= 0 else gpu.index)
        try:
            code, output, timed_out = run_capped(
                [smi, "--gpu-reset", "-i", gpu.uuid], timeout_s, SEARCH_PATH
            )
        except OSError as exc:
            return _answer(self.via, False, "not-started", f"{smi} could not be run: {exc}")
        line = one_line(output)
        if timed_out:
            message = f"nvidia-smi did not finish in {timeout_s:g} s and was killed"
            message += "; the reset may be half done"
            return _answer(self.via, False, "timeout", f"{message}: {line}" if line else message)
        if code != 0:
            meaning = EXIT_MEANINGS.get(code) if code > 0 else f"killed by signal {-code}"
            head = f"nvidia-smi exited {code}" + (f" ({meaning})" if meaning else "")
            error = f"exit {code}" if code > 0 else "killed"
            return _answer(self.via, False, error, f"{head}: {line}" if line else head)
        return {**_answer(self.via, True, None, line), **_after(gpu)}

    def _still_idle(self, gpu: Gpu, minor: int) -> None:
        """Right before the reset: no other process holds the card's device file, and
        NVML lists no process on it (either raises ``in-use``)."""
        scan = scan_holders(minor, proc=self.proc, dev=self.dev)
        others = [h for h in scan["holders"] if h["card"] and not h["helper"]]
        if others:
            shown = "; ".join(
                f"pid {h['pid']} ({one_line(str(h['command'] or '?').encode(), 40)})"
                for h in others[:_SHOWN]
            )
            more = f" and {len(others) - _SHOWN} more" if len(others) > _SHOWN else ""
            raise RequestError(
                "in-use",
                f"{len(others)} processes hold {scan['device']} ({shown}{more}): not reset",
            )
        pids = gpu.pids()
        if pids is None:
            raise RequestError(
                "not-readable", f"GPU {gpu.index} is lost or not readable: not reset"
            )
        if pids:
            listed = ", ".join(str(p) for p in sorted(pids)[:_SHOWN])
            raise RequestError(
                "in-use",
                f"GPU {gpu.index} has {len(pids)} processes on it (pids {listed}): not reset",
            )


def run_capped(argv: list[str], timeout_s: float, path: str) -> tuple[int, bytes, bool]:
    """Run ``argv`` (no shell) with its output read to the end and its first
    ``OUTPUT_CAP`` bytes kept: (exit status, output, timed out). Past ``timeout_s``
    its whole session is killed. ``OSError`` (it cannot be started) propagates."""
    env = {"PATH": path, "LC_ALL": "C", "LANG": "C"}
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd="/",
        env=env,
        start_new_session=True,
    )
    kept = bytearray()

    def drain() -> None:
        assert proc.stdout is not None
        while True:
            chunk = proc.stdout.read1(_READ_CHUNK)  # type: ignore[attr-defined]
            if not chunk:
                return
            if len(kept) < OUTPUT_CAP:
                kept.extend(chunk[: OUTPUT_CAP - len(kept)])

    reader = threading.Thread(target=drain, name="helper-reset-output", daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(_REAPED_S)  # one stuck in the driver may not die: not waited for
    reader.join(_REAPED_S)
    code = proc.returncode
    return (-signal.SIGKILL if code is None else code), bytes(kept[:OUTPUT_CAP]), timed_out


Resetter = Union[NvmlReset, SmiReset]
