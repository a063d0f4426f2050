"""A hostile helper over real SSH: the fleet keeps the host live, the console keeps going.

The "helper" is a stand-in interpreter that answers the handshake properly and then
streams what no real card reports: NaN and infinite readings, a temperature below
absolute zero, 10^30 W, an event a billion years from now, a GPU index of 10^9,
100,000 processes, escape sequences and wide text in every string.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.cells import cell_len

from gputui.fleet.fleet import Fleet
from gputui.remote import HELPER_VERSION
from gputui.telemetry import HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.wire.messages import MAX_PROCESSES, PROTOCOL_VERSION

UUID = "GPU-00000000-0000-0000-0000-000000000000"
EVIL = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J日本語🔥\u202eevil\x1b]0;open"


def hostile_lines() -> list[dict[str, Any]]:
    hello = {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "helper_version": HELPER_VERSION,
        "hostname": EVIL,
        "driver": EVIL,
        "gpus": [
            {"index": 0, "uuid": UUID, "name": EVIL, "memory_total_mib": 1e400},
            {"index": 10**9, "uuid": "GPU-bad"},
        ],
    }
    process = {"pid": 4242, "user": EVIL, "command": EVIL, "start_time": float("-inf")}
    sample = {
        "type": "sample",
        "seq": 1,
        "time": float("nan"),
        "gpus": [
            {
                "index": 0,
                "uuid": UUID,
                "util_gpu": 1e308,
                "temp_c": -300,
                "power_w": 1e30,
                "fan_pct": "fast",
                "mem_used_mib": -5,
                "throttle": [EVIL, 7],
                "processes": [process] + [{"pid": 5000 + i} for i in range(100_000)],
            },
            {"index": 10**9, "uuid": "GPU-bad", "temp_c": 50},
        ],
    }
    event = {"type": "event", "time": 1e308, "kind": EVIL, "gpu_index": 0, "xid": 79}
    return [hello, sample, event]


def fake_helper_body() -> str:
    text = "\n".join(json.dumps(obj) for obj in hostile_lines())  # NaN and Infinity too
    return f"sys.stdout.write({text!r} + '\\n'); sys.stdout.flush(); sys.stdin.read()"


async def test_hostile_values_leave_the_host_live_and_sound(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    python = kit.fake_python("python-hostile", fake_helper_body())
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).sample is not None and s.events and s,
        what="the hostile sample and event",
    )
    assert snap.status is HostStatus.LIVE
    assert snap.hello is not None and [g.index for g in snap.hello.gpus] == [0]
    assert "\x1b" not in snap.hello.hostname and "pwned" not in snap.hello.hostname
    sample = snap.sample
    assert sample is not None and sample.time is None
    gpu = sample.gpus[0]
    assert len(sample.gpus) == 1
    assert (gpu.util_gpu, gpu.temp_c, gpu.power_w, gpu.fan_pct) == (None, None, None, None)
    assert gpu.errors["temp_c"] == "OutOfRange" and gpu.errors["fan_pct"] == "WrongType"
    assert len(gpu.processes) == MAX_PROCESSES
    assert gpu.processes[0].start_time is None
    assert f"100001 process entries sent; kept the first {MAX_PROCESSES}" in sample.notes
    assert snap.events[0].time is None and snap.events[0].xid == 79


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_console_shows_a_hostile_host_without_breaking(
    kit, size: tuple[int, int]
) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    python = kit.fake_python("python-hostile", fake_helper_body())
    config = kit.config([{"name": "h1", "port": server.port, "python": python}])
    app = GpuTuiApp(Fleet(config, timing=kit.fast_timing), config)
    async with app.run_test(size=size) as pilot:
        await kit.wait_for(
            lambda: (entry := app.model.hosts.get("h1")) is not None and entry.snapshot.events,
            what="the hostile host in the console",
        )
        await pilot.pause()
        app.main.grid.select(GpuRow("h1", 0))  # detail pane, process table, the bad event
        await pilot.pause()
        screen = list(app.screen._compositor.render_strips())
        assert "bad data" in "\n".join(strip.text for strip in screen)
        for strip in screen:
            line = "".join(segment.text for segment in strip)
            assert sum(cell_len(segment.text) for segment in strip) == size[0], line
            assert not any(ch < " " or "\x7f" <= ch <= "\x9f" for ch in line), repr(line)
