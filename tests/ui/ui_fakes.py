"""A deterministic ``TelemetrySource`` and a recording ``HostControl`` for the console's tests.

Snapshots are built from JSON through ``gputui.wire.decode.decode_helper_line``, the
same path the fleet uses, so strings are cleaned exactly as real host data is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from gputui.telemetry import HostSnapshot, HostStatus, Listener, R, RequestOutcome
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import (
    Event,
    Hello,
    HelperRequest,
    IntervalResult,
    ProcessSample,
    Sample,
    Signal,
    SignalResult,
)

NOW = 1_700_000_000.0
"""The fixed "now" of every test (14 Nov 2023 22:13:20 UTC)."""

HOSTILE_COMMAND = "evil\x1b[31m --red [bold]markup[/]"
"""A process name with an escape sequence and Rich markup: both must show literally."""


def fixed_clock() -> float:
    return NOW


def decode(obj: Mapping[str, Any]) -> Any:
    return decode_helper_line(json.dumps(obj))


def hello(host: str, model: str, count: int, mem_mib: int, power_w: float) -> Hello:
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{host}-{i:04d}-0000-0000-000000000000",
            "name": model,
            "memory_total_mib": mem_mib,
            "power_limit_w": power_w,
            "pcie_max_gen": 4,
            "pcie_max_width": 16,
            "pci_bus_id": f"00000000:{0x17 + i:02X}:00.0",
        }
        for i in range(count)
    ]
    result = decode(
        {
            "type": "hello",
            "protocol": 1,
            "helper_version": "0.1.0",
            "hostname": host,
            "driver": "550.54.15",
            "cuda": "12.4",
            "gpus": gpus,
        }
    )
    assert isinstance(result, Hello)
    return result


def process(pid: int, user: str, command: str, mem: int, started: float) -> dict[str, Any]:
    return {
        "pid": pid,
        "uid": 1000 + pid % 7,
        "user": user,
        "command": command,
        "gpu_mem_mib": mem,
        "start_ticks": pid * 100,
        "start_time": started,
    }


def gpu(host: str, index: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": index,
        "uuid": f"GPU-{host}-{index:04d}-0000-0000-000000000000",
        "util_gpu": 0,
        "util_mem": 0,
        "mem_used_mib": 0,
        "temp_c": 35,
        "power_w": 60.0,
        "fan_pct": 30,
        "clock_sm_mhz": 1410,
        "clock_mem_mhz": 1593,
        "throttle": [],
        "ecc_corrected": 0,
        "ecc_uncorrected": 0,
        "pcie_gen": 4,
        "pcie_width": 16,
    }
    base.update(fields)
    return base


def sample(
    seq: int, when: float, gpus: list[dict[str, Any]], parents: list[dict[str, Any]] | None = None
) -> Sample:
    """A decoded sample; ``parents``: its parent table (the tree view's chains)."""
    extra = {"parents": parents} if parents is not None else {}
    result = decode({"type": "sample", "seq": seq, "time": when, "gpus": gpus, **extra})
    assert isinstance(result, Sample)
    return result


def gpu01_gpus(util0: int = 97) -> list[dict[str, Any]]:
    h = "gpu01"
    return [
        gpu(
            h,
            0,
            util_gpu=util0,
            mem_used_mib=62_000,
            temp_c=71,
            power_w=312.0,
            processes=[
                process(
                    4242, "alice", "python train.py --epochs 90", 61_000, NOW - 3 * 3600 - 12 * 60
                )
            ],
        ),
        gpu(
            h,
            1,
            util_gpu=45,
            mem_used_mib=20_480,
            temp_c=58,
            power_w=180.0,
            processes=[process(5150, "bob", "torchrun --nproc 8 finetune.py", 20_000, NOW - 600)],
        ),
        gpu(
            h,
            2,
            util_gpu=12,
            mem_used_mib=8_000,
            temp_c=44,
            power_w=95.0,
            processes=[
                process(6001, "bob", HOSTILE_COMMAND, 4_000, NOW - 45),
                process(6002, "alice", "jupyter-kernel", 3_900, NOW - 86_400 * 2),
            ],
        ),
        gpu(h, 3, fan_pct=None, errors={"fan_pct": "NotSupported"}),
    ]


def gpu02_gpus(util0: int = 30) -> list[dict[str, Any]]:
    h = "gpu02"
    return [
        gpu(
            h,
            0,
            util_gpu=util0,
            mem_used_mib=12_000,
            temp_c=62,
            power_w=210.0,
            processes=[process(7007, "carol", "python serve.py", 11_800, NOW - 7200)],
        ),
        gpu(
            h,
            1,
            state="lost",
            message="GPU has fallen off the bus",
            util_gpu=None,
            util_mem=None,
            mem_used_mib=None,
            temp_c=None,
            power_w=None,
            fan_pct=None,
            clock_sm_mhz=None,
            clock_mem_mhz=None,
            throttle=None,
            ecc_corrected=None,
            ecc_uncorrected=None,
            pcie_gen=None,
            pcie_width=None,
            errors={"util_gpu": "GpuIsLost", "temp_c": "GpuIsLost"},
        ),
        gpu(
            h,
            2,
            util_gpu=88,
            mem_used_mib=23_000,
            temp_c=91,
            power_w=348.0,
            throttle=["hw_thermal", "sw_power_cap"],
            processes=[process(8080, "alice", "python render.py", 22_000, NOW - 1800)],
        ),
        gpu(h, 3),
    ]


def gpu03_gpus() -> list[dict[str, Any]]:
    return [gpu("gpu03", i, util_gpu=0) for i in range(4)]


def xid_event(host: str, index: int, xid: int, ago: float, text: str) -> Event:
    result = decode(
        {
            "type": "event",
            "time": NOW - ago,
            "kind": "xid",
            "gpu_index": index,
            "gpu_uuid": f"GPU-{host}-{index:04d}-0000-0000-000000000000",
            "xid": xid,
            "text": text,
        }
    )
    assert isinstance(result, Event)
    return result


def cluster(seq: int = 1) -> list[HostSnapshot]:
    """3 hosts, 12 GPUs: one host unreachable, one GPU lost, one hot and throttled."""
    return [
        HostSnapshot(
            name="gpu01",
            address="10.0.0.1",
            status=HostStatus.LIVE,
            pool="a100",
            hello=hello("gpu01", "NVIDIA A100-SXM4-80GB", 4, 81_920, 400.0),
            sample=sample(seq, NOW - 1.2, gpu01_gpus()),
            received_at=NOW - 1.2,
        ),
        HostSnapshot(
            name="gpu02",
            address="10.0.0.2",
            status=HostStatus.LIVE,
            pool="rtx",
            hello=hello("gpu02", "NVIDIA GeForce RTX 3090", 4, 24_576, 350.0),
            sample=sample(seq, NOW - 0.4, gpu02_gpus()),
            received_at=NOW - 0.4,
            events=(xid_event("gpu02", 1, 79, 95, "GPU has fallen off the bus."),),
        ),
        HostSnapshot(
            name="gpu03",
            address="10.0.0.3",
            status=HostStatus.UNREACHABLE,
            message="connection refused",
            pool="a100",
            hello=hello("gpu03", "NVIDIA H100 80GB HBM3", 4, 81_559, 700.0),
            sample=sample(seq, NOW - 42, gpu03_gpus()),
            received_at=NOW - 42,
            next_retry_at=NOW + 8,
        ),
    ]


class FakeSource:
    """Fixed snapshots; pushes new snapshots on demand. Telemetry only: no control."""

    def __init__(self, snapshots: list[HostSnapshot] | None = None) -> None:
        self._snapshots = {s.name: s for s in (cluster() if snapshots is None else snapshots)}
        self._listeners: list[Listener] = []
        self.started = False
        self.closed = False

    def snapshots(self) -> Mapping[str, HostSnapshot]:
        return dict(self._snapshots)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    def push(self, snapshot: HostSnapshot) -> None:
        """Deliver a new snapshot to every listener, as the fleet would."""
        self._snapshots[snapshot.name] = snapshot
        for listener in list(self._listeners):
            listener(snapshot)

    def get(self, name: str) -> HostSnapshot:
        return self._snapshots[name]


class FakeControl:
    """Records what the console asked of the hosts; answers with ``outcome``."""

    def __init__(self, outcome: RequestOutcome[SignalResult] | None = None) -> None:
        self.outcome = outcome or RequestOutcome(True, "sent SIGKILL to pid 4242")
        self.signals: list[tuple[str, str, int, Signal]] = []
        self.retries: list[str | None] = []
        self.requests: list[tuple[str, HelperRequest[Any]]] = []

    def retry_now(self, host: str | None = None) -> None:
        self.retries.append(host)

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        self.signals.append((host, gpu_uuid, process.pid, signal))
        return self.outcome

    async def request(self, host: str, request: HelperRequest[R]) -> RequestOutcome[R]:
        self.requests.append((host, request))
        return RequestOutcome(False, "not in this test", "unsupported")

    async def set_refresh_interval(
        self, seconds: float
    ) -> Mapping[str, RequestOutcome[IntervalResult]]:
        return {}
