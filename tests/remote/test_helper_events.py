"""The NVML event thread: malformed events are skipped, and it never stops silently."""

from __future__ import annotations

import io
import json
import os
import queue
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from gputui.remote import xid_watch
from gputui.remote.helper import Helper, run
from gputui.remote.nvml import NVML_EVENT_TYPE_XID
from gputui.remote.wire import Output

FakeNvml = Any


def xid(device_index: int, data: Any) -> SimpleNamespace:
    return SimpleNamespace(
        eventType=NVML_EVENT_TYPE_XID, eventData=data, device=SimpleNamespace(index=device_index)
    )


def scripted_wait(monkeypatch: pytest.MonkeyPatch, script: list[Any]) -> None:
    """``nvmlEventSetWait`` returns (or raises) the script's items, then fails forever."""
    steps: Iterator[Any] = iter(script)

    def wait(event_set: Any, timeout_ms: int) -> Any:
        step = next(steps, pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN))
        if isinstance(step, BaseException):
            raise step
        return step

    monkeypatch.setattr(pynvml, "nvmlEventSetWait", wait, raising=False)


@pytest.fixture
def quick_give_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xid_watch, "EVENT_MAX_FAILURES", 3)
    monkeypatch.setattr(xid_watch, "EVENT_RETRY_S", 0.0)


def drain(q: queue.Queue[tuple[str, Any]]) -> list[tuple[str, Any]]:
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    return items


def test_bad_event_data_is_skipped_and_giving_up_is_reported(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, quick_give_up: None
) -> None:
    helper = Helper(pynvml, Output(io.BytesIO()), "host", simulated=False)
    helper.hello()
    assert helper.event_set is not None
    timeout = pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
    scripted_wait(monkeypatch, [xid(0, "garbage"), xid(0, None), timeout, xid(1, 79)])
    q: queue.Queue[tuple[str, Any]] = queue.Queue()

    helper.watch_events(q)  # returns once it gives up: three NVML errors in a row

    items = drain(q)
    events = [item for kind, item in items if kind == "event"]
    assert [(e["xid"], e["gpu_index"]) for e in events] == [(79, 1)]
    assert events[0]["gpu_uuid"] == fake_nvml.gpus[1].uuid
    errors = [item for kind, item in items if kind == "send"]
    assert len(errors) == 1
    assert errors[0]["type"] == "error" and errors[0]["fatal"] is False
    assert errors[0]["message"].startswith("Xid events stopped: Unknown")
    assert "3 times in a row" in errors[0]["message"]


def test_only_malformed_events_also_end_with_a_message(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, quick_give_up: None
) -> None:
    helper = Helper(pynvml, Output(io.BytesIO()), "host", simulated=False)
    helper.hello()
    scripted_wait(monkeypatch, [xid(0, "x")] * 10)
    q: queue.Queue[tuple[str, Any]] = queue.Queue()
    helper.watch_events(q)
    (kind, item), *rest = drain(q)
    assert kind == "send" and not rest
    assert item["message"].startswith("Xid events stopped: unreadable event data (ValueError")


def test_a_stopped_helper_does_not_report_its_event_thread(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, quick_give_up: None
) -> None:
    helper = Helper(pynvml, Output(io.BytesIO()), "host", simulated=False)
    helper.hello()
    helper.stop.set()
    scripted_wait(monkeypatch, [])
    q: queue.Queue[tuple[str, Any]] = queue.Queue()
    helper.watch_events(q)
    assert drain(q) == []


class LineSink(io.RawIOBase):
    """A stdout that hands each JSON line to a queue."""

    def __init__(self) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._buf = b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._buf += bytes(data)
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self.lines.put(json.loads(line))
        return len(data)


def test_the_running_helper_sends_the_stop_message(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, quick_give_up: None
) -> None:
    scripted_wait(monkeypatch, [])
    read_end, write_end = os.pipe()
    stdout = LineSink()
    codes: list[int] = []
    with open(read_end, "rb") as stdin:
        thread = threading.Thread(
            target=lambda: codes.append(run(["--interval", "60"], stdin, stdout)), daemon=True
        )
        thread.start()
        try:
            while True:
                message = stdout.lines.get(timeout=10)  # fails the test after 10 s
                if message["type"] == "error":
                    break
        finally:
            os.close(write_end)  # stdin EOF: the helper ends
            thread.join(10)
    assert message["fatal"] is False
    assert message["message"].startswith("Xid events stopped: Unknown")
    assert codes == [0]
