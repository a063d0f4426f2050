"""A fake amdsmi on the real ``amdsmi`` package: its Python functions stubbed with these
cards' readings, in amdsmi's own shapes and units, raising its real
``AmdSmiLibraryException`` with real ``amdsmi_status_t`` codes.

The package needs ROCm's ``libamd_smi.so`` at import; ``import_amdsmi`` imports it
over a stand-in library whose every symbol fails if called, so a function the helper
calls that is not stubbed here fails the test instead of touching a driver. Stubbing
uses ``monkeypatch.setattr`` with its default ``raising=True``: a name the real
package does not have fails the test too.
"""

from __future__ import annotations

import ctypes
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

MIB = 1024 * 1024
HANDLE_BASE = 0x5608_3A10_0000


class _Symbol:
    """A native function of the stand-in library: ctypes may set its types; a call
    means a Python function went unstubbed."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any) -> Any:
        raise AssertionError(f"libamd_smi.so's {self.name} called: stub the amdsmi function")


class _StubLibrary:
    def __init__(self, path: object, *args: Any, **kwargs: Any) -> None:
        self.path = path

    def __getattr__(self, name: str) -> _Symbol:
        if name.startswith("__"):
            raise AttributeError(name)
        symbol = _Symbol(name)
        setattr(self, name, symbol)
        return symbol


@pytest.fixture
def amdsmi_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The real ``amdsmi`` package, imported over the stand-in library; forgotten
    after the test (so ``load_amdsmi`` elsewhere finds no library, as on a host
    without ROCm)."""
    for name in [n for n in sys.modules if n == "amdsmi" or n.startswith("amdsmi.")]:
        monkeypatch.delitem(sys.modules, name)
    with monkeypatch.context() as patch:
        patch.setattr(ctypes, "CDLL", _StubLibrary)
        import amdsmi
    yield amdsmi
    for name in [n for n in sys.modules if n == "amdsmi" or n.startswith("amdsmi.")]:
        del sys.modules[name]


@dataclass
class FakeAmdGpu:
    """One AMD card's readings, in amdsmi's units (MiB, degrees C, W, microwatts for
    the cap, bytes per process). Defaults: an MI300X under load, as amd-smi shows one."""

    market_name: str = "AMD Instinct MI300X"
    asic_serial: str = "0x8462DDC1F77CE939"
    device_uuid: str = "5cff74a1-0000-1000-8084-62ddc1f77ce9"
    board_serial: str = "692251001124"
    bdf: str = "0000:05:00.0"
    vram_total: int = 196592
    vram_used: int = 147210
    gfx: Any = 97
    umc: Any = 41
    edge: int | None = None  # None: no edge sensor (NotSupported); an MI300X has none
    hotspot: int = 71
    critical: int = 105
    emergency: int = 110
    socket_power: Any = 702
    current_power: Any = 702
    average_power: Any = 688
    cap_uw: int = 750_000_000
    gfx_clk: int = 2100
    mem_clk: int = 1300
    ecc: tuple[int, int] = (0, 0)
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, VRAM bytes)
    fail: dict[str, int] = field(default_factory=dict)  # function -> status ("*": all)


def mi210(serial: str = "0x5BE2EA2DF8B0BCC6", bdf: str = "0000:c1:00.0") -> FakeAmdGpu:
    """An idle MI210: an edge sensor, only the average socket power."""
    return FakeAmdGpu(
        market_name="AMD Instinct MI210",
        asic_serial=serial,
        device_uuid="31ff740f-0000-1000-805b-e2ea2df8b0bc",
        board_serial="692202000516",
        bdf=bdf,
        vram_total=65520,
        vram_used=10,
        gfx=0,
        umc=0,
        edge=36,
        hotspot=39,
        critical=100,
        emergency=105,
        socket_power="N/A",
        current_power="N/A",
        average_power=42,
        cap_uw=300_000_000,
        gfx_clk=800,
        mem_clk=1600,
    )


class FakeAmdSmi:
    """Monkeypatches the real amdsmi functions with these cards' readings."""

    def __init__(self, module: ModuleType, gpus: list[FakeAmdGpu]) -> None:
        self.amdsmi = module
        self.gpus = gpus
        self.calls: Counter[tuple[str, int]] = Counter()
        self.init_error: int | None = None
        self.old_process_api = False
        """ROCm < 6.2: the list holds ``amdsmi_proc_info_t`` structs, each read with
        ``amdsmi_get_gpu_process_info``."""

    @property
    def status(self) -> Any:
        return self.amdsmi.amdsmi_wrapper

    def error(self, code: int) -> Exception:
        err: Exception = self.amdsmi.AmdSmiLibraryException(code)
        return err

    def _gpu(self, fn: str, handle: Any) -> FakeAmdGpu:
        if not isinstance(handle, self.status.amdsmi_processor_handle):
            raise self.amdsmi.AmdSmiParameterException(handle, self.status.amdsmi_processor_handle)
        index = (handle.value or 0) - HANDLE_BASE
        self.calls[(fn, index)] += 1
        gpu = self.gpus[index]
        code = gpu.fail.get(fn, gpu.fail.get("*"))
        if code is not None:
            raise self.error(code)
        return gpu

    def install(self, mp: pytest.MonkeyPatch) -> FakeAmdSmi:
        m, s = self.amdsmi, self.status

        def dev(fn: str, get: Any) -> None:
            def call(handle: Any, *args: Any) -> Any:
                return get(self._gpu(fn, handle), *args)

            mp.setattr(m, fn, call)

        def init(flag: Any = m.AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
            if self.init_error is not None:
                raise self.error(self.init_error)

        mp.setattr(m, "amdsmi_init", init)
        mp.setattr(m, "amdsmi_shut_down", lambda: None)
        mp.setattr(
            m,
            "amdsmi_get_processor_handles",
            lambda: [s.amdsmi_processor_handle(HANDLE_BASE + i) for i in range(len(self.gpus))],
        )
        dev(
            "amdsmi_get_gpu_asic_info",
            lambda g: {
                "market_name": g.market_name,
                "vendor_id": "0x1002",
                "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
                "subvendor_id": "0x1002",
                "device_id": "0x74a1",
                "rev_id": "0x00",
                "asic_serial": g.asic_serial,
                "oam_id": 0,
                "num_compute_units": 304,
                "target_graphics_version": "gfx942",
            },
        )
        dev("amdsmi_get_gpu_device_uuid", lambda g: g.device_uuid)
        dev(
            "amdsmi_get_gpu_board_info",
            lambda g: {
                "model_number": "102-G30211-00",
                "product_serial": g.board_serial,
                "fru_id": "N/A",
                "product_name": g.market_name,
                "manufacturer_name": "AMD",
            },
        )
        dev("amdsmi_get_gpu_device_bdf", lambda g: g.bdf)
        dev(
            "amdsmi_get_gpu_activity",
            lambda g: {"gfx_activity": g.gfx, "umc_activity": g.umc, "mm_activity": "N/A"},
        )
        dev(
            "amdsmi_get_gpu_vram_usage",
            lambda g: {"vram_total": g.vram_total, "vram_used": g.vram_used},
        )
        dev("amdsmi_get_temp_metric", self._temp)
        dev(
            "amdsmi_get_power_info",
            lambda g: {
                "socket_power": g.socket_power,
                "current_socket_power": g.current_power,
                "average_socket_power": g.average_power,
                "gfx_voltage": "N/A",
                "soc_voltage": "N/A",
                "mem_voltage": "N/A",
                "power_limit": g.cap_uw // 1_000_000,
            },
        )
        dev(
            "amdsmi_get_power_cap_info",
            lambda g: {
                "power_cap": g.cap_uw,
                "default_power_cap": g.cap_uw,
                "dpm_cap": 1,
                "min_power_cap": 0,
                "max_power_cap": g.cap_uw,
            },
        )
        dev("amdsmi_get_clock_info", self._clock)
        dev(
            "amdsmi_get_gpu_total_ecc_count",
            lambda g: {
                "correctable_count": g.ecc[0],
                "uncorrectable_count": g.ecc[1],
                "deferred_count": 0,
            },
        )
        dev("amdsmi_get_gpu_process_list", self._process_list)
        return self

    def _temp(self, g: FakeAmdGpu, sensor: Any, metric: Any) -> int:
        m = self.amdsmi
        if not isinstance(sensor, m.AmdSmiTemperatureType):
            raise m.AmdSmiParameterException(sensor, m.AmdSmiTemperatureType)
        if not isinstance(metric, m.AmdSmiTemperatureMetric):
            raise m.AmdSmiParameterException(metric, m.AmdSmiTemperatureMetric)
        if sensor == m.AmdSmiTemperatureType.EDGE and g.edge is None:
            raise self.error(self.status.AMDSMI_STATUS_NOT_SUPPORTED)
        if metric == m.AmdSmiTemperatureMetric.CRITICAL:
            return g.critical
        if metric == m.AmdSmiTemperatureMetric.EMERGENCY:
            return g.emergency
        if sensor == m.AmdSmiTemperatureType.EDGE:
            assert g.edge is not None
            return g.edge
        return g.hotspot

    def _clock(self, g: FakeAmdGpu, clock: Any) -> dict[str, int]:
        m = self.amdsmi
        if not isinstance(clock, m.AmdSmiClkType):
            raise m.AmdSmiParameterException(clock, m.AmdSmiClkType)
        clk = g.mem_clk if clock == m.AmdSmiClkType.MEM else g.gfx_clk
        return {"clk": clk, "min_clk": 0, "max_clk": clk, "clk_locked": 0, "clk_deep_sleep": 0}

    def _process_list(self, g: FakeAmdGpu) -> list[Any]:
        if self.old_process_api:
            structs = []
            for pid, vram in g.procs:
                info = self.status.amdsmi_proc_info_t()
                info.name, info.pid, info.mem = b"python3", pid, vram
                info.memory_usage.vram_mem = vram
                structs.append(info)
            return structs
        return [
            {
                "name": "python3",
                "pid": pid,
                "mem": vram,
                "engine_usage": {"gfx": 1_200_000, "enc": 0},
                "memory_usage": {"gtt_mem": 2 * MIB, "cpu_mem": 0, "vram_mem": vram},
                "cu_occupancy": "N/A",
            }
            for pid, vram in g.procs
        ]

    def install_old_process_api(self, mp: pytest.MonkeyPatch) -> None:
        """amdsmi before ROCm 6.2: ``amdsmi_get_gpu_process_info`` reads one struct."""
        self.old_process_api = True

        def info(handle: Any, proc: Any) -> dict[str, Any]:
            self._gpu("amdsmi_get_gpu_process_info", handle)
            if not isinstance(proc, self.status.amdsmi_proc_info_t):
                raise self.amdsmi.AmdSmiParameterException(proc, self.status.amdsmi_proc_info_t)
            return {
                "name": proc.name.decode("utf-8"),
                "pid": proc.pid,
                "mem": proc.mem,
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {
                    "gtt_mem": 0,
                    "cpu_mem": 0,
                    "vram_mem": proc.memory_usage.vram_mem,
                },
            }

        # The function left the package in ROCm 6.2: here it is put back.
        mp.setattr(self.amdsmi, "amdsmi_get_gpu_process_info", info, raising=False)
