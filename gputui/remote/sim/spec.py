"""The ``--sim`` spec: which GPU models a simulated host has, and which faults.

Grammar: ``GROUP ("+" GROUP)* ("," OPTION)*`` with ``GROUP = [COUNT "x"] MODEL`` and
options ``name=HOST``, ``seed=N``, ``cluster=ID`` and ``fault=KIND@INDEX`` (INDEX:
the GPU's place in the spec). ``cluster`` is mixed into every card's UUID and serial,
so two simulated clusters on one machine (two demos) never share a card's identity.
Model figures come from real ``nvidia-smi -q`` captures (memory totals, power
limits, max clocks, PCIe links, which readings are N/A on GeForce and on passively
cooled datacenter cards, which cards remap rows or retire pages).

Fault kinds (``FAULT_HELP`` has the same lines):

- ``lost``: the GPU answers GpuIsLost from its third sample on (at once when injected);
- ``notsupported``: power and fan readings answer NotSupported;
- ``unknown``: the temperature reading answers Unknown;
- ``xid:NN``: Xid NN, as an NVML event and a kernel-log line;
- ``ecc``: uncorrected (and corrected) ECC errors count up, volatile and aggregate;
- ``throttle``: HW slowdown and HW power brake, power capped, clocks down;
- ``phantom``, ``orphan``: memory held with no process listed;
- ``hang``: the next NVML call on the GPU never returns (until cleared);
- ``remap-pending``: a row remapped for an uncorrectable error waits for a GPU reset;
- ``remap-failed``: a row remap failed (the card should be replaced);
- ``retired``: pages retired (single-bit and double-bit) and a retirement pending;
- ``hw-slowdown``: the HW slowdown reason is set and clocks halve while armed;
- ``pcie-down``: the PCIe link runs below its maximum generation and width, replays count up;
- ``nvlink-down``: NVLink 0 is inactive, its CRC and replay errors counting up;
- ``fabric``: NVSwitch fabric registration in progress, then not started;
- ``persistence-off``: persistence mode reads disabled;
- ``missing``: the GPU is absent from ``nvmlDeviceGetCount`` from the helper's start
  (a GPU fallen off the bus; spec only, since a running helper counted already).

At run time the ``sim`` request takes ``KIND@INDEX`` (INDEX: the NVML index) to
inject, ``-KIND@INDEX`` to clear one fault and ``clear@INDEX`` to clear all of a
GPU's; a cleared GPU reads as it did before the fault (its counts back to zero).
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_GPUS = 64
"""Also the client wire's limit (``gputui.wire.fields`` keeps its own copy)."""
FAULT_HELP: dict[str, str] = {
    "lost": "the GPU answers GpuIsLost from its third sample on (at once when injected)",
    "notsupported": "power and fan readings answer NotSupported",
    "unknown": "the temperature reading answers Unknown",
    "xid": "xid:NN: Xid NN, as an NVML event and a kernel-log line",
    "ecc": "uncorrected (and corrected) ECC errors count up, volatile and aggregate",
    "throttle": "HW slowdown and HW power brake, power capped, clocks down",
    "phantom": "memory held with no process listed",
    "orphan": "memory held with no process listed",
    "hang": "the next NVML call on the GPU never returns (until cleared)",
    "remap-pending": "a row remapped for an uncorrectable error waits for a GPU reset",
    "remap-failed": "a row remap failed (the card should be replaced)",
    "retired": "pages retired (single-bit and double-bit) and a retirement pending",
    "hw-slowdown": "the HW slowdown reason is set and clocks halve while armed",
    "pcie-down": "the PCIe link runs below its maximum generation and width",
    "nvlink-down": "NVLink 0 is inactive, its CRC and replay errors counting up",
    "fabric": "NVSwitch fabric registration in progress, then not started",
    "persistence-off": "persistence mode reads disabled",
    "missing": "the GPU is absent from the GPU count from the helper's start (spec only)",
}
FAULT_KINDS = tuple(FAULT_HELP)
_KINDS_TEXT = ", ".join("xid:NN" if k == "xid" else k for k in FAULT_KINDS)


class Model(NamedTuple):
    name: str
    memory_mib: int
    power_limit_w: float
    sm_max_mhz: int
    mem_max_mhz: int
    sm_idle_mhz: int
    mem_idle_mhz: int
    pcie_gen: int
    pcie_width: int
    ecc: bool
    fan: int | None  # None: no fan reading (NotSupported); 0: reads 0 %; >0: idle %
    mig: bool
    idle_w: float
    idle_c: int
    load_c: int
    base_used_mib: int
    geforce: bool


# fmt: off
# key: name, MiB, W, SM max, mem max, SM idle, mem idle, PCIe gen, width, ECC, fan,
#      MIG, idle W, idle C, load C, MiB used at idle, GeForce
MODELS: dict[str, Model] = {
    "rtx2080super": Model("NVIDIA GeForce RTX 2080 SUPER", 8192, 250.0, 2145, 7751, 765, 810,
                          3, 16, False, 38, False, 39.0, 36, 76, 210, True),
    "rtx3090": Model("NVIDIA GeForce RTX 3090", 24576, 350.0, 2100, 9751, 210, 405,
                     4, 16, False, 30, False, 30.0, 35, 78, 250, True),
    "rtx4080super": Model("NVIDIA GeForce RTX 4080 SUPER", 16376, 320.0, 3165, 11501, 210, 405,
                          4, 16, False, 30, False, 26.0, 40, 68, 590, True),
    "rtx4090": Model("NVIDIA GeForce RTX 4090", 24564, 450.0, 3120, 10501, 210, 405,
                     4, 16, False, 30, False, 28.0, 36, 72, 300, True),
    "a10": Model("NVIDIA A10", 23028, 150.0, 1695, 6251, 225, 405,
                 4, 16, True, 0, False, 44.0, 33, 72, 0, False),
    "a100-40gb": Model("NVIDIA A100-SXM4-40GB", 40960, 400.0, 1410, 1215, 210, 1215,
                       4, 16, True, None, True, 55.0, 32, 66, 0, False),
    "a100-80gb": Model("NVIDIA A100-SXM4-80GB", 81920, 400.0, 1410, 1593, 210, 1593,
                       4, 16, True, None, True, 60.0, 33, 67, 0, False),
    "h100": Model("NVIDIA H100 80GB HBM3", 81559, 700.0, 1980, 2619, 345, 2619,
                  5, 16, True, None, True, 70.0, 38, 62, 0, False),
    "h200": Model("NVIDIA H200", 143771, 700.0, 1980, 3201, 345, 3201,
                  5, 16, True, None, True, 78.0, 29, 55, 0, False),
    "l40s": Model("NVIDIA L40S", 46068, 350.0, 2520, 9001, 210, 405,
                  4, 16, True, None, False, 35.0, 34, 66, 0, False),
    "v100": Model("Tesla V100-SXM2-32GB", 32768, 300.0, 1530, 877, 135, 877,
                  3, 16, True, None, False, 40.0, 34, 70, 0, False),
}
# fmt: on


class Health(NamedTuple):
    """What a model answers for the health readings (NotSupported where it cannot)."""

    remap: bool  # row remapping (Ampere and later datacenter cards)
    retired: bool  # page retirement (before Ampere)
    nvlinks: int  # NVLinks (0: none, NotSupported)
    fabric: bool  # NVSwitch fabric registration (Hopper SXM)
    slowdown_c: int
    shutdown_c: int
    persistence: bool  # persistence mode on as installed


# fmt: off
HEALTH: dict[str, Health] = {
    "rtx2080super": Health(False, False, 0, False, 97, 100, False),
    "rtx3090": Health(False, False, 0, False, 95, 98, False),
    "rtx4080super": Health(False, False, 0, False, 96, 101, False),
    "rtx4090": Health(False, False, 0, False, 89, 92, False),
    "a10": Health(True, False, 0, False, 98, 101, True),
    "a100-40gb": Health(True, False, 12, False, 89, 92, True),
    "a100-80gb": Health(True, False, 12, False, 89, 92, True),
    "h100": Health(True, False, 18, True, 89, 95, True),
    "h200": Health(True, False, 18, True, 89, 95, True),
    "l40s": Health(True, False, 0, False, 88, 91, True),
    "v100": Health(False, True, 6, False, 87, 90, True),
}
# fmt: on

# Faults a model must be able to show, and why not where it cannot.
_NEEDS: dict[str, tuple[str, str]] = {
    "ecc": ("ecc", "has no ECC memory"),
    "remap-pending": ("remap", "does not remap rows (retired pages instead, or no ECC)"),
    "remap-failed": ("remap", "does not remap rows (retired pages instead, or no ECC)"),
    "retired": ("retired", "does not retire pages (it remaps rows, or has no ECC)"),
    "nvlink-down": ("nvlinks", "has no NVLink"),
    "fabric": ("fabric", "has no NVSwitch fabric"),
}


def supports(model: str, kind: str) -> str | None:
    """Why ``model`` cannot show fault ``kind``, or None when it can."""
    need = _NEEDS.get(kind)
    if need is None:
        return None
    attr, why = need
    source: object = MODELS[model] if attr == "ecc" else HEALTH[model]
    return None if getattr(source, attr) else why


class Fault(NamedTuple):
    kind: str
    gpu: int
    xid: int | None = None
    cleared: bool = False
    """``-KIND@INDEX`` (kind ``clear``: ``clear@INDEX``, every fault of the GPU)."""


class SimSpec(NamedTuple):
    models: tuple[str, ...]
    hostname: str | None = None
    seed: int = 0
    faults: tuple[Fault, ...] = ()
    cluster: str = ""
    """Mixed into each card's UUID and serial ("": the identities of no cluster)."""


_GROUP_RE = re.compile(r"(?:(\d+)x)?([a-z0-9][a-z0-9-]*)")
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,62})")
_CLUSTER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}")


def parse_fault(
    text: str, gpu_count: int | None = None, models: tuple[str, ...] | None = None
) -> Fault:
    """``KIND@INDEX`` (``xid:NN@INDEX`` for Xid), checked against the GPUs when known;
    ``-KIND@INDEX`` and ``clear@INDEX`` clear (``Fault.cleared``)."""
    kind, sep, index_text = text.strip().partition("@")
    kind = kind.lower().strip()
    if not sep or not index_text.isdigit() or len(index_text) > 4:
        raise ValueError(f"bad fault {text[:40]!r}: expected KIND@INDEX, e.g. lost@0")
    index = int(index_text)
    xid = None
    cleared = kind.startswith("-") or kind == "clear"
    if kind.startswith("-"):
        kind = kind[1:]
        if kind == "xid" or kind.startswith("xid:"):
            kind = "xid"  # any Xid of the GPU
    if kind == "clear" or (cleared and kind == "xid"):
        pass
    elif kind.startswith("xid:"):
        number = kind[4:]
        if not number.isdigit() or not 0 < int(number) < 1000:
            raise ValueError(f"bad fault {text[:40]!r}: Xid must be a number 1..999, e.g. xid:79@0")
        kind, xid = "xid", int(number)
    elif kind not in FAULT_KINDS or kind == "xid":
        raise ValueError(f"bad fault {text[:40]!r}: kind must be one of {_KINDS_TEXT}")
    if gpu_count is not None and index >= gpu_count:
        raise ValueError(
            f"bad fault {text[:40]!r}: GPU {index} does not exist "
            f"(the spec has {gpu_count} GPUs, 0..{gpu_count - 1})"
        )
    if models is not None and not cleared:
        why = supports(models[index], kind)
        if why is not None:
            raise ValueError(f"bad fault {text[:40]!r}: {models[index]} {why}")
    return Fault(kind, index, xid, cleared)


def parse_spec(text: str) -> SimSpec:
    """Parse ``4xrtx3090,name=gpu-a,fault=lost@1``; ValueError names the bad part."""
    if not text or not text.strip():
        raise ValueError("empty sim spec: expected e.g. 4xrtx3090 or 2xa100-80gb+2xh100")
    parts = [p.strip() for p in text.strip().split(",")]
    groups_text, options = parts[0], parts[1:]
    models: list[str] = []
    for group_text in groups_text.split("+"):
        group = group_text.strip().lower()
        match = _GROUP_RE.fullmatch(group)
        if not match:
            raise ValueError(f"bad GPU group {group!r}: expected [COUNT x]MODEL, e.g. 4xrtx3090")
        count = int(match.group(1)) if match.group(1) is not None else 1
        model = match.group(2)
        if model not in MODELS:
            raise ValueError(
                f"unknown GPU model {model!r} in {group!r} (known: {', '.join(sorted(MODELS))})"
            )
        if count < 1:
            raise ValueError(f"bad GPU count in {group!r}: must be at least 1")
        if len(models) + count > MAX_GPUS:  # checked before building the list
            raise ValueError(f"too many GPUs in {groups_text!r}: at most {MAX_GPUS} per host")
        models.extend([model] * count)
    hostname: str | None = None
    seed = 0
    cluster = ""
    fault_texts: list[str] = []
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not sep or not value:
            raise ValueError(
                f"bad option {option!r}: expected name=HOST, seed=N, cluster=ID or fault=KIND@INDEX"
            )
        if key == "name":
            if not _HOST_RE.fullmatch(value):
                raise ValueError(f"bad name {value!r}: use letters, digits, '-' and '.' (max 63)")
            hostname = value
        elif key == "seed":
            try:
                seed = int(value)
            except ValueError:
                raise ValueError(f"bad seed {value!r}: expected an integer") from None
        elif key == "cluster":
            if not _CLUSTER_RE.fullmatch(value):
                raise ValueError(f"bad cluster {value!r}: use letters, digits and '-' (max 32)")
            cluster = value
        elif key == "fault":
            fault_texts.append(value)
        else:
            raise ValueError(
                f"unknown option {option!r}: expected name=, seed=, cluster= or fault="
            )
    model_tuple = tuple(models)
    faults = tuple(parse_fault(f, len(models), model_tuple) for f in fault_texts)
    for fault, fault_text in zip(faults, fault_texts):
        if fault.cleared:
            raise ValueError(
                f"bad fault {fault_text[:40]!r}: a spec arms faults, clearing is at run time"
            )
    return SimSpec(model_tuple, hostname, seed, faults, cluster)
