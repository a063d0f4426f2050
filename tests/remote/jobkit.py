"""What the job tests share: a helper driven by request, job scripts, cleanup of jobs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputui.remote.procs import read_start_ticks

NS = "testns0001"
SPEC = "2xh100,name=jobs-host"


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy (returned); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def script(body: str) -> list[str]:
    """argv of a Python job running ``body`` (with os, sys, time, signal imported)."""
    return [sys.executable, "-c", "import os, sys, time, signal\n" + body]


def wait_file(path: Path | str) -> str:
    """Job code: block until ``path`` exists (the test's go signal), polling the file."""
    return f"while not os.path.exists({str(path)!r}):\n    time.sleep(0.005)\n"


class Jobs:
    """Requests to one helper process, each answered by its own ``result``."""

    def __init__(self, helper: Any, ns: str = NS) -> None:
        self.helper = helper
        self.ns = ns
        self.next_id = 1000

    def send(self, op: str, **fields: Any) -> int:
        self.next_id += 1
        self.helper.send({"type": "request", "id": self.next_id, "op": op, **fields})
        return self.next_id

    def results(self, ids: list[int], timeout: float = 20.0) -> list[dict[str, Any]]:
        """The results of several requests in flight at once, in the order of ``ids``."""
        found: dict[int, dict[str, Any]] = {}

        def take(msg: dict[str, Any]) -> bool:
            if msg["type"] == "result" and msg["id"] in ids:
                found[msg["id"]] = msg
            return len(found) == len(ids)

        if len(found) < len(ids):
            self.helper.expect(take, timeout)
        return [found[i] for i in ids]

    def call(self, op: str, timeout: float = 10.0, **fields: Any) -> dict[str, Any]:
        fields.setdefault("ns", self.ns)
        return self.helper.result(self.send(op, **fields), timeout)  # type: ignore[no-any-return]

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        res = self.call(op, **fields)
        assert res["ok"] is True, res
        return res["value"]  # type: ignore[no-any-return]

    def launch(self, job_id: int, argv: list[str], **fields: Any) -> dict[str, Any]:
        return self.call("launch", **launch_fields(job_id, argv, **fields))

    def state(self, job_id: int) -> dict[str, Any]:
        (job,) = self.ok("jobs", job_ids=[job_id])["jobs"]
        return job  # type: ignore[no-any-return]

    def wait_state(self, job_id: int, state: str, timeout: float = 10.0) -> dict[str, Any]:
        return wait_until(  # type: ignore[no-any-return]
            lambda: (job := self.state(job_id))["state"] == state and job,
            timeout,
            f"job {job_id} to be {state}",
        )

    def log(self, job_id: int) -> str:
        text, offset = "", 0
        while True:
            got = self.ok("job_log", job_id=job_id, offset=offset, max_bytes=65536)
            text += str(got["data"])
            if got["offset"] == offset:
                return text
            offset = got["offset"]


def launch_fields(job_id: int, argv: list[str], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ns": NS,
        "job_id": job_id,
        "user": None,
        "argv": argv,
        "cwd": None,
        "env": {},
        "gpu_uuids": [],
        "time_limit_s": None,
        "grace_s": 2,
    }
    base.update(fields)
    return base


def state_file(root: Path, job_id: int, ns: str = NS) -> dict[str, Any]:
    return json.loads((root / ns / str(job_id) / "state.json").read_text())  # type: ignore[no-any-return]


def proc_state(pid: int) -> str | None:
    """The state letter of ``pid`` (R, S, Z, ...), or None when it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :][:1].decode()


def gone(pid: int) -> bool:
    return proc_state(pid) in (None, "Z", "X")


def kill_jobs(root: Path) -> None:
    """Teardown: end every job and supervisor still running under ``root``."""
    for path in root.glob("*/*/state.json"):
        with contextlib.suppress(OSError, ValueError):
            raw = json.loads(path.read_text())
            for pid_key, ticks_key, group in (
                ("pid", "start_ticks", True),
                ("supervisor_pid", "supervisor_ticks", False),
            ):
                pid, ticks = raw.get(pid_key), raw.get(ticks_key)
                if isinstance(pid, int) and ticks is not None and read_start_ticks(pid) == ticks:
                    with contextlib.suppress(OSError):
                        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def helper_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (the shell the helper was started by, and the helper)."""
    found = [pid]
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                data = (entry / "stat").read_bytes()
                ppid = int(data[data.rfind(b")") + 2 :].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
