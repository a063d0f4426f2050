"""Shared fixtures: a fake NVML on the real ``pynvml`` module, and a helper subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nvmlkit import FakeNvml, three_gpus

from gputui.remote.bundle import helper_command, helper_payload
from gputui.remote.helper import run


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    return FakeNvml(three_gpus()).install(monkeypatch)


def _run_once(argv: list[str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    out = io.BytesIO()
    code = run([*(argv or []), "--once"], io.BytesIO(), out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def run_once() -> Callable[..., tuple[int, list[dict[str, Any]]]]:
    """Run the helper in-process with ``--once``; returns exit code and messages."""
    return _run_once


class HelperProc:
    """The real helper as a subprocess, started the way a client does it over SSH
    (``wrap``: a command prefix, e.g. one that drops to another user first)."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        wrap: list[str] | None = None,
    ) -> None:
        cmd = helper_command(python)
        self.proc = subprocess.Popen(
            [*(wrap or []), "/bin/sh", "-c", cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(helper_payload(argv))
        self.proc.stdin.flush()
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, obj: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.proc.stdin.write(data.encode() + b"\n")
        self.proc.stdin.flush()

    def expect(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        """The next message matching ``pred``, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no matching message within {timeout}s; last: {self.seen[-3:]}"
                )
            try:
                msg = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                raise AssertionError(f"helper exited; stderr: {self._stderr()}")
            self.seen.append(msg)
            if pred(msg):
                return msg

    def result(self, rid: int, timeout: float = 10.0) -> dict[str, Any]:
        return self.expect(lambda m: m["type"] == "result" and m["id"] == rid, timeout)

    def _stderr(self) -> str:
        try:
            assert self.proc.stderr is not None
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except Exception:
            return ""

    def close(self) -> int:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                return self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)


@pytest.fixture
def start_helper() -> Iterator[Callable[..., HelperProc]]:
    started: list[HelperProc] = []

    def start(argv: list[str], env: dict[str, str] | None = None, **kw: Any) -> HelperProc:
        helper = HelperProc(argv, env, **kw)
        started.append(helper)
        return helper

    yield start
    for helper in started:
        helper.close()


@pytest.fixture
def sim_process() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start a long ``sleep`` whose environment puts it on a simulated GPU."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        gpu: str, mem_mib: int = 4096, util: int = 80, argv: list[str] | None = None
    ) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            GPUTUI_SIM_GPU=gpu,
            GPUTUI_SIM_MEM_MIB=str(mem_mib),
            GPUTUI_SIM_UTIL=str(util),
        )
        proc = subprocess.Popen(argv or ["sleep", "120"], env=env)
        procs.append(proc)
        # Popen returns once exec has begun; the kernel sets the new environment up
        # a moment later. Wait for it, as a 1 Hz helper effectively always does.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                    if fh.read(1):
                        break
            except OSError:
                break
            time.sleep(0.001)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _wait_for(pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        threading.Event().wait(interval)


@pytest.fixture
def wait_for() -> Callable[..., None]:
    """Poll a condition until true, failing after a deadline (never a bare sleep)."""
    return _wait_for
