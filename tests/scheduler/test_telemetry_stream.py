"""The head's ``telemetry`` subscription on a real head socket: the first push is
every host in full, each later one only what changed (a GPU field that did not
change is not sent), and the deltas rebuild what the head holds."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll

from gputui.scheduler.client.deltas import HostBook, host_view
from gputui.wire.messages import ProcessSample


class Stream:
    """A raw connection that subscribes and reads the telemetry pushes in order."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(15)
        self.sock.connect(str(path))
        self.lines = self.sock.makefile("rb")

    def subscribe(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        request = {"id": 1, "op": "telemetry", "args": args or {}}
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        return self.next(lambda m: m.get("id") == 1)

    def push(self) -> dict[str, Any]:
        return self.next(lambda m: m.get("push") == "telemetry")

    def next(self, wanted: Any) -> dict[str, Any]:
        while True:
            raw = self.lines.readline()
            assert raw, "the head closed the connection"
            message = json.loads(raw)
            if wanted(message):
                assert isinstance(message, dict)
                return message

    def close(self) -> None:
        self.lines.close()
        self.sock.close()


@pytest.fixture
def th(tmp_path: Path) -> Any:
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 1}) as head:
        yield head


def test_first_push_is_full_then_only_what_changed(th: ThreadedHead) -> None:
    stream = Stream(th.sock)
    try:
        assert stream.subscribe()["result"] == {"hosts": ["gpu01", "gpu02"]}
        first = stream.push()
        assert first["n"] == 0
        by_host = {d["host"]: d for d in first["hosts"]}
        assert set(by_host) == {"gpu01", "gpu02"}
        assert by_host["gpu01"]["n"] == 2
        assert set(by_host["gpu01"]["gpus"]) == {"0", "1"}
        assert by_host["gpu01"]["gpus"]["0"]["uuid"] == "GPU-gpu01-0000"
        assert "util_gpu" in by_host["gpu01"]["gpus"]["0"]  # everything, even the unread
        assert by_host["gpu01"]["top"]["status"] == "live"
        book = HostBook()
        for delta in first["hosts"]:
            book.apply(delta)

        # A sample that changed nothing on any GPU: no GPU field is sent.
        assert th.hosts is not None
        th.in_loop(lambda: th.hosts.sample_at("gpu01", 1_000_000.0))  # type: ignore[union-attr]
        second = stream.push()
        assert second["n"] == 1
        (delta,) = second["hosts"]
        assert delta["host"] == "gpu01"
        assert set(delta) == {"host", "top"}, delta
        assert delta["top"] == {
            "sample": {"seq": 1, "time": 1_000_000.0, "parents": [], "notes": []}
        }
        book.apply(delta)

        # One GPU's utilisation and processes: that field and that list alone.
        proc = ProcessSample(pid=4242, uid=1000, user="alice", command="python train.py")
        th.in_loop(lambda: th.hosts.put_processes("gpu01", 1, (proc,), util=80))  # type: ignore[union-attr]
        third = stream.push()
        (delta,) = third["hosts"]
        assert delta["gpus"] == {"1": {"util_gpu": 80}}
        assert delta["procs"]["1"][0]["command"] == "python train.py"
        assert set(delta["procs"]) == {"1"}
        snap = book.apply(delta)
        assert snap.sample is not None
        assert snap.sample.gpus[1].processes == (proc,)
        assert snap.sample.gpus[1].util_gpu == 80
        assert th.head is not None
        latest = th.head.telemetry.latest("gpu01")
        assert latest is not None
        assert host_view(snap) == host_view(latest)
    finally:
        stream.close()


def test_a_bad_subscription_is_refused_in_one_line(th: ThreadedHead) -> None:
    stream = Stream(th.sock)
    try:
        answer = stream.subscribe({"detail": "gpu01"})
        assert answer["ok"] is False
        assert answer["error"]["code"] == "bad-args"
    finally:
        stream.close()


def _ping(path: Path) -> dict[str, Any]:
    with LineClient(path) as client:
        told: dict[str, Any] = client.ok("ping")["telemetry"]
        return told


def test_ping_tells_the_consoles_subscribed_and_what_pushing_to_them_cost(
    th: ThreadedHead,
) -> None:
    """What consoles cost the head, as the head counts it (the benchmark's figure for
    many consoles): how many are subscribed, the pushes, and the pusher's CPU."""
    assert _ping(th.sock) == {"subscribers": 0, "pushed": 0, "cpu_s": 0.0}
    stream = Stream(th.sock)
    try:
        stream.subscribe()
        stream.push()
        told = _ping(th.sock)
        assert told["subscribers"] == 1
        assert told["pushed"] >= 1
        assert told["cpu_s"] > 0.0
    finally:
        stream.close()
    # Dropped once the head sees the connection gone.
    poll(lambda: _ping(th.sock)["subscribers"] == 0, what="the closed console to be dropped")
