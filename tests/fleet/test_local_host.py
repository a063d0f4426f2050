"""A ``local: true`` host: the real helper as a child process, no SSH, the same link.

Everything above the transport is the code the SSH hosts run: the handshake, the
stream, the watchdog, requests, stderr kept for the reason a helper did not start.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import pytest
from test_fleet_stream import find_process, start_gpu_process

from gputui.fleet.backoff import LinkTiming
from gputui.fleet.transport import LocalTransport
from gputui.telemetry import HostStatus
from gputui.wire.messages import LaunchRequest


def helper_pid(fleet, name: str) -> int | None:
    helper = fleet.links[name]._helper
    transport = helper.transport if helper is not None else None
    return transport.pid if isinstance(transport, LocalTransport) else None


async def test_a_local_sim_host_streams_signals_and_stops(kit) -> None:
    config = kit.config([{"name": "here", "local": True, "sim": "2xrtx3090,name=here"}])
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "here")).sample is not None and s, what="a sample"
    )
    assert snap.status is HostStatus.LIVE and snap.address == "local"
    assert snap.hello is not None and snap.hello.simulated and len(snap.hello.gpus) == 2
    pid = helper_pid(fleet, "here")
    assert pid is not None and kit.alive(pid)
    uuid = snap.hello.gpus[1].uuid
    proc = await start_gpu_process(uuid, mem=2048)
    try:
        target = await kit.wait_for(
            lambda: find_process(kit.snap(fleet, "here"), uuid, proc.pid), what="the process"
        )
        outcome = await fleet.signal_process("here", uuid, target, "TERM")
        assert outcome.ok, outcome.message
        assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGTERM
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    await fleet.close()
    assert kit.snap(fleet, "here").status is HostStatus.STOPPED
    await kit.wait_for(lambda: not kit.alive(pid), what="the local helper gone")


async def test_a_local_and_an_ssh_host_side_by_side(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config(
        [
            {"name": "here", "local": True, "sim": "1xa10,name=here"},
            {"name": "there", "port": server.port, "sim": "1xl40s,name=there"},
        ]
    )
    fleet = await kit.start_fleet(config)
    await kit.wait_for(
        lambda: all(fleet.samples_received()[n] >= 3 for n in ("here", "there")),
        what="samples from both",
    )
    assert len(server.command_pids()) == 1  # only the SSH host used the server


@pytest.mark.parametrize(
    ("python", "expected"),
    [
        ("/nonexistent/python3", "could not start the helper: /nonexistent/python3: "),
        (
            "fake:sys.stderr.write('ModuleNotFoundError: no zlib\\n'); sys.exit(3)",
            "helper exited with status 3: ModuleNotFoundError: no zlib",
        ),
    ],
    ids=["missing", "fails"],
)
async def test_a_local_helper_that_cannot_start_says_why(kit, python: str, expected: str) -> None:
    if python.startswith("fake:"):
        python = kit.fake_python("python-fails", python.removeprefix("fake:"))
    config = kit.config([{"name": "here", "local": True, "python": python}])
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "here")).status is HostStatus.HELPER_ERROR and s,
        what="a helper error",
    )
    assert snap.message.startswith(expected), snap.message
    assert snap.next_retry_at is not None


async def test_a_hung_local_helper_is_killed_and_started_again(kit) -> None:
    config = kit.config(
        [{"name": "here", "local": True, "sim": "1xa10,name=here"}],
        health={"stale_after_s": 0.5},
    )
    timing = LinkTiming(backoff_base=0.2, backoff_cap=0.5, hung_after=1.5, hello_timeout=5)
    fleet = await kit.start_fleet(config, timing=timing)
    await kit.wait_for(lambda: kit.snap(fleet, "here").sample is not None, what="a sample")
    first = helper_pid(fleet, "here")
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # alive, silent
    try:
        await kit.wait_for(lambda: kit.snap(fleet, "here").status is HostStatus.STALE, what="stale")
        await kit.wait_for(lambda: not kit.alive(first), what="the hung helper killed")
    finally:
        if kit.alive(first):
            os.kill(first, signal.SIGKILL)
    await kit.wait_for(
        lambda: (
            helper_pid(fleet, "here") not in (None, first)
            and kit.snap(fleet, "here").status is HostStatus.LIVE
        ),
        what="a new helper, live",
    )


async def test_a_local_host_launches_jobs_with_the_same_protocol(kit, monkeypatch) -> None:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(kit.tmp_path / "jobs"))
    config = kit.config([{"name": "here", "local": True, "sim": "1xa10,name=here"}])
    fleet = await kit.start_fleet(config, jobs_namespace="local001")
    await kit.wait_for(lambda: kit.snap(fleet, "here").jobs_seen_at, what="a jobs list")
    request = LaunchRequest(ns="local001", job_id=1, argv=[sys.executable, "-c", "exit(7)"])
    outcome = await fleet.launch("here", request)
    assert outcome.ok, outcome.message
    done = await kit.wait_for(
        lambda: [j for j in kit.snap(fleet, "here").jobs if j.ended], what="the job's end"
    )
    assert (done[0].job_id, done[0].state, done[0].exit_code) == (1, "exited", 7)


async def test_a_local_helper_gone_before_its_payload_says_how_it_ended(
    kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race under load, made certain: the child has exited (its input closed)
    before the payload is written. That is no failure to start: its status and stderr
    say why, as when it exits later (it read "the local helper's input is closed")."""
    from gputui.fleet import transport

    opened = transport.LocalTransport.open.__func__  # type: ignore[attr-defined]

    async def open_and_let_it_exit(cls: Any, python: str, owner: Any) -> Any:
        local = await opened(cls, python, owner)
        await local.wait_closed()
        return local

    monkeypatch.setattr(transport.LocalTransport, "open", classmethod(open_and_let_it_exit))
    python = kit.fake_python("python-fails", "sys.stderr.write('no zlib\\n'); sys.exit(3)")
    fleet = await kit.start_fleet(kit.config([{"name": "here", "local": True, "python": python}]))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "here")).status is HostStatus.HELPER_ERROR and s,
        what="a helper error",
    )
    assert snap.message.startswith("helper exited with status 3: no zlib"), snap.message


async def test_a_request_can_wait_for_a_host_still_connecting(kit) -> None:
    """``wait_session``: the session once the helper said hello, not ``None`` at once
    (an attach just after the head started); and only so long for a host that does
    not come."""
    config = kit.config(
        [
            {"name": "here", "local": True, "sim": "1xrtx3090,name=here"},
            {"name": "nowhere", "address": "127.0.0.1", "port": kit.free_port()},
        ]
    )
    fleet = await kit.start_fleet(config)
    try:
        link = fleet.links["here"]
        assert link.session is None  # the helper has not said hello yet
        # Woken by the hello, not by its own limit: far longer than the deadline.
        session = await asyncio.wait_for(link.wait_session(3600), 60)
        assert session is not None and session is link.session
        assert kit.snap(fleet, "here").hello is not None
        assert await fleet.links["nowhere"].wait_session(0.2) is None
    finally:
        await fleet.close()
