"""The ``--sim`` spec: which GPU models a simulated host has, and which faults.

Grammar: ``GROUP ("+" GROUP)* ("," OPTION)*`` with ``GROUP = [COUNT "x"] MODEL`` and
options ``name=HOST``, ``seed=N``, ``fault=KIND@INDEX``. Model figures come from real
``nvidia-smi -q`` captures (memory totals, power limits, max clocks, PCIe links,
which readings are N/A on GeForce and on passively cooled datacenter cards).
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_GPUS = 64
FAULT_KINDS = ("lost", "notsupported", "unknown", "xid", "ecc", "throttle", "phantom", "hang")


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
}
# fmt: on


class Fault(NamedTuple):
    kind: str
    gpu: int
    xid: int | None = None


class SimSpec(NamedTuple):
    models: tuple[str, ...]
    hostname: str | None = None
    seed: int = 0
    faults: tuple[Fault, ...] = ()


_GROUP_RE = re.compile(r"^(?:(\d+)x)?([a-z0-9][a-z0-9-]*)$")
_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,62})$")


def parse_fault(
    text: str, gpu_count: int | None = None, models: tuple[str, ...] | None = None
) -> Fault:
    """``KIND@INDEX`` (``xid:NN@INDEX`` for Xid), checked against the GPUs when known."""
    kind, sep, index_text = text.strip().partition("@")
    kind = kind.lower()
    if not sep or not index_text.isdigit():
        raise ValueError(f"bad fault {text!r}: expected KIND@INDEX, e.g. lost@0")
    index = int(index_text)
    xid = None
    if kind.startswith("xid:"):
        number = kind[4:]
        if not number.isdigit() or not 0 < int(number) < 1000:
            raise ValueError(f"bad fault {text!r}: Xid must be a number 1..999, e.g. xid:79@0")
        kind, xid = "xid", int(number)
    elif kind not in FAULT_KINDS or kind == "xid":
        raise ValueError(
            f"bad fault {text!r}: kind must be one of lost, notsupported, unknown, xid:NN, ecc, "
            "throttle, phantom, hang"
        )
    if gpu_count is not None and index >= gpu_count:
        raise ValueError(
            f"bad fault {text!r}: GPU {index} does not exist "
            f"(the spec has {gpu_count} GPUs, 0..{gpu_count - 1})"
        )
    if models is not None and kind == "ecc" and not MODELS[models[index]].ecc:
        raise ValueError(f"bad fault {text!r}: {models[index]} has no ECC memory")
    return Fault(kind, index, xid)


def parse_spec(text: str) -> SimSpec:
    """Parse ``4xrtx3090,name=gpu-a,fault=lost@1``; ValueError names the bad part."""
    if not text or not text.strip():
        raise ValueError("empty sim spec: expected e.g. 4xrtx3090 or 2xa100-80gb+2xh100")
    parts = [p.strip() for p in text.strip().split(",")]
    groups_text, options = parts[0], parts[1:]
    models: list[str] = []
    for group_text in groups_text.split("+"):
        group = group_text.strip().lower()
        match = _GROUP_RE.match(group)
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
    fault_texts: list[str] = []
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not sep or not value:
            raise ValueError(
                f"bad option {option!r}: expected name=HOST, seed=N or fault=KIND@INDEX"
            )
        if key == "name":
            if not _HOST_RE.match(value):
                raise ValueError(f"bad name {value!r}: use letters, digits, '-' and '.' (max 63)")
            hostname = value
        elif key == "seed":
            try:
                seed = int(value)
            except ValueError:
                raise ValueError(f"bad seed {value!r}: expected an integer") from None
        elif key == "fault":
            fault_texts.append(value)
        else:
            raise ValueError(f"unknown option {option!r}: expected name=, seed= or fault=")
    model_tuple = tuple(models)
    faults = tuple(parse_fault(f, len(models), model_tuple) for f in fault_texts)
    return SimSpec(model_tuple, hostname, seed, faults)
