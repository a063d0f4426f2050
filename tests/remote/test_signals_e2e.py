"""The real helper over pipes, shipped by the bundle: signals, bad requests, EOF."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputui.remote import signals as sigmod
from gputui.remote.procs import read_start_ticks, read_uid
from gputui.remote.signals import RequestError, send_signal
from gputui.wire.decode import decode_helper_line

SPEC = "2xh100,name=e2e-host"


def _proc_on(helper: Any, gpu_index: int, pid: int) -> dict[str, Any]:
    msg = helper.expect(
        lambda m: (
            m["type"] == "sample"
            and any(p["pid"] == pid for p in m["gpus"][gpu_index].get("processes", []))
        )
    )
    return next(p for p in msg["gpus"][gpu_index]["processes"] if p["pid"] == pid)


def _signal(
    rid: int, pid: int, uuid: str, uid: Any, ticks: Any, sig: str = "TERM"
) -> dict[str, Any]:
    return {
        "type": "request",
        "id": rid,
        "op": "signal",
        "pid": pid,
        "signal": sig,
        "gpu_uuid": uuid,
        "uid": uid,
        "start_ticks": ticks,
    }


def test_signal_flow_end_to_end(
    start_helper: Callable[..., Any], sim_process: Callable[..., subprocess.Popen[bytes]]
) -> None:
    victim = sim_process("0")
    bystander = sim_process("0")
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"])
    hello = helper.expect(lambda m: m["type"] == "hello")
    assert hello["simulated"] is True and hello["hostname"] == "e2e-host"
    uuid0, uuid1 = (g["uuid"] for g in hello["gpus"])
    seen = _proc_on(helper, 0, victim.pid)
    assert seen["uid"] == os.getuid() and seen["start_ticks"] == read_start_ticks(victim.pid)
    _proc_on(helper, 0, bystander.pid)

    # Start time that does not match: refused, the process lives on.
    helper.send(_signal(1, bystander.pid, uuid0, os.getuid(), seen["start_ticks"] + 12345))
    res = helper.result(1)
    assert (res["ok"], res["code"]) == (False, "pid-reused")
    # Right process, wrong GPU.
    helper.send(_signal(2, bystander.pid, uuid1, os.getuid(), read_start_ticks(bystander.pid)))
    assert helper.result(2)["code"] == "not-on-gpu"
    # Owner that does not match.
    helper.send(_signal(3, bystander.pid, uuid0, os.getuid() + 1, read_start_ticks(bystander.pid)))
    assert helper.result(3)["code"] == "pid-reused"
    assert bystander.poll() is None

    helper.send(_signal(4, victim.pid, uuid0, seen["uid"], seen["start_ticks"]))
    res = helper.result(4)
    assert res["ok"] is True, res
    assert res["value"] == {"method": hello["signal_method"], "pid": victim.pid, "signal": "TERM"}
    assert victim.wait(timeout=10) == -signal.SIGTERM
    assert bystander.poll() is None
    # Gone now: no such process (pid not reused this fast).
    helper.send(_signal(5, victim.pid, uuid0, seen["uid"], seen["start_ticks"]))
    assert helper.result(5)["code"] in ("no-such-process", "not-on-gpu")
    for msg in helper.seen:
        decode_helper_line(json.dumps(msg))
    assert helper.close() == 0


def test_bad_requests_and_eof(start_helper: Callable[..., Any]) -> None:
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"])
    hello = helper.expect(lambda m: m["type"] == "hello")
    helper.send("this is {not json")
    err = helper.expect(lambda m: m["type"] == "error")
    assert err["fatal"] is False and "malformed request line" in err["message"]
    helper.send("[" * 500_000)
    err = helper.expect(lambda m: m["type"] == "error")
    assert err["fatal"] is False and "malformed request line" in err["message"]
    helper.send({"op": "signal"})
    assert "integer id" in helper.expect(lambda m: m["type"] == "error")["message"]
    bad = [
        (10, {"pid": "12", "signal": "TERM"}),
        (11, {"pid": 1234, "signal": "BOOM"}),
        (12, {"pid": 1234, "signal": "TERM", "gpu_uuid": "GPU-$(reboot)"}),
        (13, {"pid": 1234, "signal": "TERM", "uid": True}),
    ]
    for rid, fields in bad:
        req = {
            "type": "request",
            "id": rid,
            "op": "signal",
            "gpu_uuid": hello["gpus"][0]["uuid"],
            "uid": None,
            "start_ticks": None,
            **fields,
        }
        helper.send(req)
        res = helper.result(rid)
        assert (res["ok"], res["code"]) == (False, "bad-request"), res
        assert res["error"]
    helper.send({"type": "request", "id": 20, "op": "reboot", "argv": ["x"]})
    assert helper.result(20)["code"] == "unsupported"
    helper.send({"type": "request", "id": 23, "op": "launch", "argv": ["x"]})
    assert helper.result(23)["code"] == "bad-request"  # no namespace: nothing started
    helper.send({"type": "request", "id": 21, "op": "interval", "seconds": 0.001})
    assert helper.result(21)["value"] == {"seconds": 0.1}
    helper.send({"type": "request", "id": 22, "op": "sim", "fault": "lost@1"})
    assert helper.result(22)["ok"] is True
    helper.expect(lambda m: m["type"] == "sample" and m["gpus"][1]["state"] == "lost")
    last = helper.expect(lambda m: m["type"] == "sample")
    later = helper.expect(lambda m: m["type"] == "sample")
    assert later["seq"] > last["seq"] and later["gpus"][0]["state"] == "ok"
    assert helper.close() == 0  # EOF on stdin: clean exit


def test_hostile_process_names_travel_as_data(
    start_helper: Callable[..., Any], sim_process: Callable[..., subprocess.Popen[bytes]]
) -> None:
    nasty = "\x1b[2J\x1b]0;owned\x07\r" + "A" * 5000
    proc = sim_process(
        "1",
        argv=[sys.executable, "-c", "import time; time.sleep(120)", nasty, b"\xff\xfe-not-utf8"],
    )
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"])
    entry = _proc_on(helper, 1, proc.pid)
    assert len(entry["command"]) <= 512
    assert entry["command"].startswith(sys.executable)
    assert "\x1b[2J" in entry["command"]  # raw: the client strips it
    line = next(m for m in reversed(helper.seen) if m["type"] == "sample")
    decoded = decode_helper_line(json.dumps(line))
    cmd = decoded.gpus[1].processes[0].command  # type: ignore[union-attr]
    assert "\x1b" not in cmd and "\x07" not in cmd
    helper.expect(lambda m: m["type"] == "sample" and m["seq"] > line["seq"])


def test_bad_sim_spec_is_fatal_with_message(start_helper: Callable[..., Any]) -> None:
    helper = start_helper(["--sim", "3xrtx9999"])
    hello = helper.expect(lambda m: m["type"] == "hello")
    assert hello["gpus"] == [] and "unknown GPU model 'rtx9999'" in hello["errors"]["nvml"]
    err = helper.expect(lambda m: m["type"] == "error")
    assert err["fatal"] is True
    assert helper.proc.wait(10) != 0


def test_proc_stat_fallback_and_permission_denied(
    sim_process: Callable[..., subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = sim_process("0")
    uuid = "GPU-12345678-1234-1234-1234-123456789abc"
    req = _signal(1, proc.pid, uuid, os.getuid(), read_start_ticks(proc.pid), "KILL")

    def on_gpu(u: str) -> set[int] | None:
        return {proc.pid} if u == uuid else None

    real_kill = os.kill

    def denied(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(sigmod.os, "kill", denied)
    with pytest.raises(RequestError) as info:
        send_signal(req, on_gpu, use_pidfd=False)
    assert info.value.code == "permission-denied"
    assert info.value.message.startswith(f"permission denied: pid {proc.pid} belongs to ")
    monkeypatch.setattr(sigmod.os, "kill", real_kill)
    value = send_signal(req, on_gpu, use_pidfd=False)
    assert value == {"method": "proc-stat", "pid": proc.pid, "signal": "KILL"}
    assert proc.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(RequestError) as info:
        send_signal(req, on_gpu, use_pidfd=False)
    assert info.value.code == "no-such-process"


def test_a_request_without_owner_or_start_time_is_never_sent(
    start_helper: Callable[..., Any], sim_process: Callable[..., subprocess.Popen[bytes]]
) -> None:
    """A client that could not read the process's owner or start time gets a refusal,
    not a blind signal that might hit a reused pid."""
    victim = sim_process("0")
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"])
    hello = helper.expect(lambda m: m["type"] == "hello")
    uuid0 = hello["gpus"][0]["uuid"]
    seen = _proc_on(helper, 0, victim.pid)
    for rid, uid, ticks in ((1, None, seen["start_ticks"]), (2, seen["uid"], None)):
        helper.send(_signal(rid, victim.pid, uuid0, uid, ticks))
        res = helper.result(rid)
        assert (res["ok"], res["code"]) == (False, "cannot-verify"), res
        assert "not signalled" in res["error"]
    assert victim.poll() is None
    assert helper.close() == 0


def test_owner_is_the_real_uid_from_status(tmp_path: Path) -> None:
    """/proc/PID is owned by root for non-dumpable processes; the real uid is in status."""
    proc = tmp_path / "4242"
    proc.mkdir()
    (proc / "status").write_text("Name:\tpython\nUid:\t1001\t0\t0\t0\nGid:\t100\t100\t100\t100\n")
    assert read_uid(4242, str(tmp_path)) == 1001
    assert read_uid(4243, str(tmp_path)) is None


def test_helper_ends_after_eof_even_when_nvml_hangs(start_helper: Callable[..., Any]) -> None:
    """A sample stuck in the driver must not keep a helper alive once its channel is
    gone, or every reconnect to that host would leave one more behind."""
    helper = start_helper(["--sim", "2xrtx3090,fault=hang@1", "--interval", "0.1"])
    helper.expect(lambda m: m["type"] == "hello")
    helper.proc.stdin.close()
    assert helper.proc.wait(timeout=30) == 0
