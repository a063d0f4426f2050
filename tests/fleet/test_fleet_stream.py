"""A real SSH connection to an in-process server, the real helper, real processes."""

from __future__ import annotations

import asyncio
import os
import sys

from simscope import sim_env

from gputui.fleet.backoff import LinkTiming
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import ProcessSample


async def start_gpu_process(uuid: str, *, mem: int = 1234) -> asyncio.subprocess.Process:
    """A real process the simulator puts on GPU ``uuid``."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = sim_env(PATH=path, GPUTUI_SIM_GPU=uuid, GPUTUI_SIM_MEM_MIB=str(mem))
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(120)", env=env
    )


def find_process(snapshot: HostSnapshot, uuid: str, pid: int) -> ProcessSample | None:
    if snapshot.sample is None:
        return None
    for gpu in snapshot.sample.gpus:
        if gpu.uuid == uuid:
            for proc in gpu.processes:
                if proc.pid == pid:
                    return proc
    return None


async def test_connects_streams_and_kills_a_real_process(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "sim": "2xrtx3090,name=h1"}])
    seen: list[HostSnapshot] = []
    fleet = await kit.start_fleet(config)
    unsubscribe = fleet.subscribe(seen.append)

    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).sample is not None and s, what="first sample"
    )
    assert snap.status is HostStatus.LIVE
    assert snap.hello is not None and len(snap.hello.gpus) == 2
    assert snap.hello.hostname == "h1" and snap.hello.simulated
    assert [g.name for g in snap.hello.gpus] == ["NVIDIA GeForce RTX 3090"] * 2
    # start() only creates the link tasks, so the listener was there before any ran:
    # it saw the whole story, connecting first, then live with nothing in between.
    statuses = [s.status for s in seen]
    assert statuses[0] is HostStatus.CONNECTING and seen[0].hello is None
    assert HostStatus.LIVE in statuses
    assert set(statuses[: statuses.index(HostStatus.LIVE)]) == {HostStatus.CONNECTING}
    first_seq = snap.sample.seq
    await kit.wait_for(
        lambda: kit.snap(fleet, "h1").sample.seq >= first_seq + 2, what="more samples"
    )
    assert fleet.samples_received()["h1"] >= 3
    # Snapshots are new objects each time, never edited in place.
    assert len({id(s) for s in seen}) == len(seen)

    uuid = snap.hello.gpus[0].uuid
    proc = await start_gpu_process(uuid)
    try:
        target = await kit.wait_for(
            lambda: find_process(kit.snap(fleet, "h1"), uuid, proc.pid), what="process on GPU"
        )
        assert target.gpu_mem_mib == 1234 and target.uid == os.getuid()
        outcome = await fleet.signal_process("h1", uuid, target, "TERM")
        assert outcome.ok, outcome.message
        assert await asyncio.wait_for(proc.wait(), 10) == -15
        again = await fleet.signal_process("h1", uuid, target, "TERM")
        assert not again.ok
        assert again.message in (
            f"process {proc.pid} already exited",
            "process no longer on that GPU",
        )
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    unsubscribe()

    unknown = await fleet.signal_process("nope", uuid, target, "TERM")
    assert not unknown.ok and "no host" in unknown.message


async def test_reconnects_after_the_server_restarts(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}])
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.LIVE, what="live")

    await server.stop()
    down = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.UNREACHABLE and s,
        what="unreachable",
    )
    assert down.next_retry_at is not None
    assert down.message
    assert "\n" not in down.message

    await server.start()  # same port, same host key
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.LIVE, what="live again")
    before = fleet.samples_received()["h1"]
    await kit.wait_for(lambda: fleet.samples_received()["h1"] > before, what="new samples")


async def test_a_stopped_helper_goes_stale_and_comes_back(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config(
        [{"name": "h1", "port": server.port, "sim": "1xh100,name=h1"}],
        health={"stale_after_s": 0.8},
    )
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: kit.snap(fleet, "h1").sample is not None, what="a sample")

    server.freeze()  # SIGSTOP the helper: connection up, no data
    stale = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.STALE and s, what="stale"
    )
    assert "no sample" in stale.message
    server.thaw()
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.LIVE, what="live")


async def test_a_hung_host_does_not_hold_up_the_others(kit) -> None:
    servers = [await kit.servers.start() for _ in range(3)]
    kit.known_hosts(*servers)
    config = kit.config(
        [
            {"name": f"h{i}", "port": s.port, "sim": f"2xl40s,name=h{i}"}
            for i, s in enumerate(servers)
        ],
        health={"stale_after_s": 0.6},
    )
    timing = LinkTiming(backoff_base=0.2, backoff_cap=0.5, hung_after=2.0, hello_timeout=1.0)
    fleet = await kit.start_fleet(config, timing=timing)
    await kit.wait_for(
        lambda: all(s.status is HostStatus.LIVE for s in fleet.snapshots().values()),
        what="all live",
    )
    h1: list[HostSnapshot] = []
    fleet.subscribe(lambda s: h1.append(s) if s.name == "h1" else None)
    servers[1].freeze()
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.STALE, what="stale")
    counts = fleet.samples_received()
    dropped = await kit.wait_for(
        lambda: [s for s in h1 if s.status is HostStatus.UNREACHABLE], what="hung host dropped"
    )
    assert "no data" in dropped[0].message and dropped[0].next_retry_at is not None
    now = fleet.samples_received()
    assert now["h0"] >= counts["h0"] + 3
    assert now["h2"] >= counts["h2"] + 3
    assert now["h1"] == counts["h1"]
    assert kit.snap(fleet, "h0").status is HostStatus.LIVE
    assert kit.snap(fleet, "h2").status is HostStatus.LIVE


async def test_a_frozen_helper_does_not_answer_a_signal_in_time(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}])
    timing = LinkTiming(request_timeout=0.5, hung_after=60)
    fleet = await kit.start_fleet(config, timing=timing)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).sample is not None and s, what="a sample"
    )
    server.freeze()
    uuid = snap.hello.gpus[0].uuid
    outcome = await fleet.signal_process("h1", uuid, ProcessSample(pid=424242), "TERM")
    assert not outcome.ok
    assert outcome.message == (
        "no answer from h1 in 0.5 s; the signal may still have been delivered"
    )
    assert outcome.code == "timeout"
    server.thaw()


async def test_xid_events_are_kept_and_close_marks_stopped(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    spec = "2xa100-80gb,name=h1,fault=xid:79@1"
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port, "sim": spec}]))
    snap = await kit.wait_for(lambda: (s := kit.snap(fleet, "h1")).events and s, what="event")
    assert any(e.xid == 79 and e.gpu_index == 1 for e in snap.events)
    await fleet.close()
    assert kit.snap(fleet, "h1").status is HostStatus.STOPPED
    await kit.wait_for(lambda: not server.command_pids(), what="helper gone after close")


async def test_proxy_jump_goes_through_a_bastion(kit) -> None:
    bastion = await kit.servers.start(allow_forwarding=True)
    target = await kit.servers.start()
    kit.known_hosts(bastion, target)
    jump = f"{kit.config([]).defaults.user}@127.0.0.1:{bastion.port}"
    config = kit.config(
        [{"name": "inner", "port": target.port, "sim": "1xl40s,name=inner", "proxy_jump": jump}]
    )
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: kit.snap(fleet, "inner").sample is not None, what="sample")
    assert not bastion.command_pids()  # the bastion only forwarded
    assert len(target.command_pids()) == 1


async def test_kernel_log_xids_are_not_repeated_by_reconnects(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    spec = "1xa100-80gb,name=h1,fault=xid:94@0"  # a kernel-log line and, soon, an NVML event
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port, "sim": spec}]))

    def nvml_events() -> int:
        return sum(1 for e in kit.snap(fleet, "h1").events if e.source == "nvml")

    for session in (1, 2, 3):
        if session > 1:
            await server.stop()
            await kit.wait_for(
                lambda: kit.snap(fleet, "h1").status is HostStatus.UNREACHABLE, what="down"
            )
            await server.start()
        # Each helper sends its kernel-log history first, its NVML Xid a few samples later.
        await kit.wait_for(lambda s=session: nvml_events() == s, what=f"session {session}'s Xid")
    events = kit.snap(fleet, "h1").events
    history = [e for e in events if e.source == "kernel-log"]
    assert len(history) == 1
    assert history[0].xid == 94 and history[0].gpu_index == 0
    keys = [(e.source, e.time, e.xid, e.gpu_uuid, e.text) for e in events]
    assert len(keys) == len(set(keys))
