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

AMD models (``mi210``, ``mi300x``) are read through the simulated ``amdsmi``
(``sim.amdsmi``), numbered after the NVIDIA cards on the host; of the faults they show
``lost`` (every amdsmi call fails: the card's sample is ``error``), ``notsupported``,
``unknown``, ``ecc``, ``phantom``/``orphan`` and ``hang``.

At run time the ``sim`` request takes ``KIND@INDEX`` (INDEX: the NVML index) to
inject, ``-KIND@INDEX`` to clear one fault and ``clear@INDEX`` to clear all of a
GPU's; a cleared GPU reads as it did before the fault (its counts back to zero).
"""

from __future__ import annotations

import re
from typing import NamedTuple


def N_(message: str) -> str:
    """Marks ``message`` for the console's catalogue (``gputui.locale``): the helper
    speaks English, the console says a spec's errors in its reader's language."""
    return message


class SpecError(ValueError):
    """A bad sim spec or fault, in one line: ``message`` (English, marked) formatted
    with ``fields``, which the console looks up in its own catalogue first."""

    def __init__(self, message: str, **fields: object) -> None:
        super().__init__(message.format(**fields))
        self.message = message
        self.fields = fields


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
    vendor: str = "nvidia"
    """``amd``: read through the simulated ``amdsmi`` (``sim.amdsmi``), not NVML."""


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
    # AMD Instinct cards, from AMD's data sheets (no capture: gputui has not run on
    # one): passively cooled, ECC HBM; the MI300X reports no edge temperature.
    "mi210": Model("AMD Instinct MI210", 65520, 300.0, 1700, 1600, 800, 1600,
                   4, 16, True, None, False, 42.0, 36, 70, 10, False, "amd"),
    "mi300x": Model("AMD Instinct MI300X", 196592, 750.0, 2100, 1300, 130, 900,
                    5, 16, True, None, False, 140.0, 40, 75, 285, False, "amd"),
    "a40": Model("NVIDIA A40", 46068, 300.0, 1740, 7251, 210, 405,
                 4, 16, True, None, False, 30.0, 32, 70, 0, False),
}
# fmt: on

# MIG-enabled cards: the same card with MIG mode on and slices an admin made, as
# (profile, memory MiB, GPU instance slices, compute instance slices) per MIG device,
# with the memory sizes ``nvidia-smi mig -lgip`` lists for each profile.
_A100_1G = ("1g.10gb", 9728, 1, 1)
_A100_2G = ("2g.20gb", 19968, 2, 2)
_A100_3G = ("3g.40gb", 40192, 3, 3)
_H100_1G = ("1g.10gb", 9984, 1, 1)
_H100_2G = ("2g.20gb", 20096, 2, 2)
_H100_3G = ("3g.40gb", 40320, 3, 3)
MIG_LAYOUTS: dict[str, tuple[tuple[str, int, int, int], ...]] = {
    "a100-80gb-mig": (_A100_1G,) * 7,
    "a100-80gb-migmix": (_A100_3G, _A100_2G, _A100_2G),
    "h100-mig": (_H100_1G,) * 7,
    "h100-migmix": (_H100_3G, _H100_2G, _H100_2G),
}
"""Model key -> its slices, in MIG device index order (``7x a100-80gb-mig``: seven
1g.10gb slices on each card)."""
_MIG_BASE = {
    "a100-80gb-mig": "a100-80gb",
    "a100-80gb-migmix": "a100-80gb",
    "h100-mig": "h100",
    "h100-migmix": "h100",
}
for _key, _base in _MIG_BASE.items():
    MODELS[_key] = MODELS[_base]


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
    "mi210": Health(False, False, 0, False, 100, 105, True),
    "mi300x": Health(False, False, 0, False, 105, 110, True),
    "a40": Health(True, False, 0, False, 88, 93, True),
}
# fmt: on
for _key, _base in _MIG_BASE.items():
    HEALTH[_key] = HEALTH[_base]

# NVML's architecture number of each model (``nvmlDeviceGetArchitecture``: 5 Volta,
# 6 Turing, 7 Ampere, 8 Ada, 9 Hopper): locked clocks need 5 or more.
ARCH: dict[str, int] = {
    "rtx2080super": 6,
    "rtx3090": 7,
    "rtx4080super": 8,
    "rtx4090": 8,
    "a10": 7,
    "a100-40gb": 7,
    "a100-80gb": 7,
    "h100": 9,
    "h200": 9,
    "l40s": 8,
    "v100": 5,
    "a40": 7,
    "a100-80gb-mig": 7,
    "a100-80gb-migmix": 7,
    "h100-mig": 9,
    "h100-migmix": 9,
    "mi210": 0,  # AMD: no NVML clocks (0: reported as not supported)
    "mi300x": 0,
}
HELD_IDLE_W: dict[str, float] = {"a40": 110.0, "v100": 59.0}
"""What a card draws held but idle (a process holds memory and does nothing): it
stays in a high power state. Measured on an A40 (110 W against 30 W empty) and a
V100 (40 W against 27 W, scaled to this model's idle draw); other models draw
``HELD_IDLE_FACTOR`` times their idle draw."""
HELD_IDLE_FACTOR = 1.8
LOCKED_SHARE = 0.15
"""A held idle card with its clocks locked low draws its idle draw plus this share of
what holding it added."""


def held_idle_w(model: str) -> float:
    return HELD_IDLE_W.get(model, MODELS[model].idle_w * HELD_IDLE_FACTOR)


# Faults a model must be able to show, and why not where it cannot.
_NO_REMAP = N_("bad fault {fault}: {model} does not remap rows (retired pages instead, or no ECC)")
_NEEDS: dict[str, tuple[str, str]] = {
    "ecc": ("ecc", N_("bad fault {fault}: {model} has no ECC memory")),
    "remap-pending": ("remap", _NO_REMAP),
    "remap-failed": ("remap", _NO_REMAP),
    "retired": (
        "retired",
        N_("bad fault {fault}: {model} does not retire pages (it remaps rows, or has no ECC)"),
    ),
    "nvlink-down": ("nvlinks", N_("bad fault {fault}: {model} has no NVLink")),
    "fabric": ("fabric", N_("bad fault {fault}: {model} has no NVSwitch fabric")),
}


AMD_FAULTS = frozenset({"lost", "notsupported", "unknown", "ecc", "phantom", "orphan", "hang"})
"""The faults an AMD model shows (the others are NVML readings amdsmi has not)."""


def supports(model: str, kind: str) -> str | None:
    """Why ``model`` cannot show fault ``kind`` (a message of ``SpecError``, with the
    fields ``fault`` and ``model``; ``kinds`` too for an AMD card), or None when it can."""
    if MODELS[model].vendor == "amd" and kind not in AMD_FAULTS and kind != "missing":
        return N_("bad fault {fault}: {model} is an AMD card (only {kinds} are simulated)")
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


_NO_SUCH_GPU = N_(
    "bad fault {fault}: GPU {index} does not exist (the spec has {count} GPUs, 0..{last})"
)
_BAD_OPTION = N_("bad option {option}: expected name=HOST, seed=N, cluster=ID or fault=KIND@INDEX")
_GROUP_RE = re.compile(r"(?:(\d+)x)?([a-z0-9][a-z0-9-]*)")
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,62})")
_CLUSTER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}")


def parse_fault(
    text: str, gpu_count: int | None = None, models: tuple[str, ...] | None = None
) -> Fault:
    """``KIND@INDEX`` (``xid:NN@INDEX`` for Xid), checked against the GPUs when known;
    ``-KIND@INDEX`` and ``clear@INDEX`` clear (``Fault.cleared``)."""
    shown = repr(text[:40])
    kind, sep, index_text = text.strip().partition("@")
    kind = kind.lower().strip()
    if not sep or not index_text.isdigit() or len(index_text) > 4:
        raise SpecError(N_("bad fault {fault}: expected KIND@INDEX, e.g. lost@0"), fault=shown)
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
            raise SpecError(
                N_("bad fault {fault}: Xid must be a number 1..999, e.g. xid:79@0"), fault=shown
            )
        kind, xid = "xid", int(number)
    elif kind not in FAULT_KINDS or kind == "xid":
        raise SpecError(
            N_("bad fault {fault}: kind must be one of {kinds}"), fault=shown, kinds=_KINDS_TEXT
        )
    if gpu_count is not None and index >= gpu_count:
        raise SpecError(
            _NO_SUCH_GPU,
            fault=shown,
            index=index,
            count=gpu_count,
            last=gpu_count - 1,
        )
    if models is not None and not cleared:
        why = supports(models[index], kind)
        if why is not None:
            kinds = ", ".join(sorted(AMD_FAULTS))
            raise SpecError(why, fault=shown, model=models[index], kinds=kinds)
    return Fault(kind, index, xid, cleared)


def parse_spec(text: str) -> SimSpec:
    """Parse ``4xrtx3090,name=gpu-a,fault=lost@1``; ``SpecError`` names the bad part."""
    if not text or not text.strip():
        raise SpecError(N_("empty sim spec: expected e.g. 4xrtx3090 or 2xa100-80gb+2xh100"))
    parts = [p.strip() for p in text.strip().split(",")]
    groups_text, options = parts[0], parts[1:]
    models: list[str] = []
    for group_text in groups_text.split("+"):
        group = group_text.strip().lower()
        match = _GROUP_RE.fullmatch(group)
        if not match:
            raise SpecError(
                N_("bad GPU group {group}: expected [COUNT x]MODEL, e.g. 4xrtx3090"),
                group=repr(group),
            )
        count = int(match.group(1)) if match.group(1) is not None else 1
        model = match.group(2)
        if model not in MODELS:
            raise SpecError(
                N_("unknown GPU model {model} in {group} (known: {models})"),
                model=repr(model),
                group=repr(group),
                models=", ".join(sorted(MODELS)),
            )
        if count < 1:
            raise SpecError(N_("bad GPU count in {group}: must be at least 1"), group=repr(group))
        if len(models) + count > MAX_GPUS:  # checked before building the list
            raise SpecError(
                N_("too many GPUs in {groups}: at most {most} per host"),
                groups=repr(groups_text),
                most=MAX_GPUS,
            )
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
            raise SpecError(
                _BAD_OPTION,
                option=repr(option),
            )
        if key == "name":
            if not _HOST_RE.fullmatch(value):
                raise SpecError(
                    N_("bad name {name}: use letters, digits, '-' and '.' (max 63)"),
                    name=repr(value),
                )
            hostname = value
        elif key == "seed":
            try:
                seed = int(value)
            except ValueError:
                raise SpecError(
                    N_("bad seed {seed}: expected an integer"), seed=repr(value)
                ) from None
        elif key == "cluster":
            if not _CLUSTER_RE.fullmatch(value):
                raise SpecError(
                    N_("bad cluster {cluster}: use letters, digits and '-' (max 32)"),
                    cluster=repr(value),
                )
            cluster = value
        elif key == "fault":
            fault_texts.append(value)
        else:
            raise SpecError(
                N_("unknown option {option}: expected name=, seed=, cluster= or fault="),
                option=repr(option),
            )
    model_tuple = tuple(models)
    faults = tuple(parse_fault(f, len(models), model_tuple) for f in fault_texts)
    for fault, fault_text in zip(faults, fault_texts):
        if fault.cleared:
            raise SpecError(
                N_("bad fault {fault}: a spec arms faults, clearing is at run time"),
                fault=repr(fault_text[:40]),
            )
    return SimSpec(model_tuple, hostname, seed, faults, cluster)
