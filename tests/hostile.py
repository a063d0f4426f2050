"""Hypothesis strategies for what a hostile or broken helper can send.

Every field of a ``hello``, ``sample``, ``event`` or ``jobs`` message is drawn either
from what a real card reports or from anything JSON can carry: extreme and non-finite
numbers, bools where numbers belong, numbers where strings belong, nested junk, and
strings from every Unicode category with terminal control sequences spliced in.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# Sequences a terminal acts on, including the forms that are easy to miss.
CONTROL_SEQUENCES = [
    "\x1b[31m",
    "\x1b[2J\x1b[H",
    "\x1b]0;pwned\x07",
    "\x1b]52;c;ZXZpbA==\x07",  # write the clipboard
    "\x1b]0;no terminator ",
    "\x1b]8;;http://x\x1b\\",
    "\x1bP+q\x1b\\",
    "\x1b_apc",
    "\x9b31m",
    "\x9d0;c1 osc\x9c",
    "\x1bc",
    "\x1b",
    "\x07\x08\x7f\x00",
    "\r\n\t\v\f",
    "\u202e\u2066",  # bidi overrides
    "\u200b\u200d\ufeff",  # zero-width
    "\u3164\u115f\u1160\uffa0",  # Hangul fillers
    "e\u0301\u0301\u0301\u0301\u0301",  # combining flood
    "\u0301",  # a mark with nothing under it
    "日本語のプロセス",
    "🔥👍🏽🇺🇸",
    "\ufe0f\U000e0041",
    "\ud800",  # a lone surrogate
    "[bold red]markup[/]",
]

# Wide (CJK, emoji), zero-width and combining characters, densely: what breaks columns.
WIDTH_TRAPS = "日本語プ가ｗ😀🔥\u0301\u0308\u200b\u200d\ufe0f\u3164\U0001f3fd\U0001f1fa"

hostile_text = st.one_of(
    st.text(st.characters(codec=None, categories=None), max_size=40),
    st.text(st.sampled_from(WIDTH_TRAPS + "ab "), min_size=1, max_size=40),
    st.sampled_from(CONTROL_SEQUENCES),
    st.lists(st.one_of(st.sampled_from(CONTROL_SEQUENCES), st.text(max_size=8)), max_size=6).map(
        "".join
    ),
    st.integers(1, 3000).map(lambda n: "x" * n),
)

extreme_numbers = st.one_of(
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 10**9, 10**30, 2**63, 2**64, -273, -274]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 1e30, 5e-324]),
)

any_json: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), extreme_numbers, hostile_text),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(hostile_text, children, max_size=4),
    ),
    max_leaves=12,
)


def field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a realistic value, often anything at all."""
    return st.one_of(good, good, any_json)


def ident(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An identity (index, uuid, host name): nearly always sound, so what it names
    gets far enough to be drawn; now and then anything at all."""
    return st.one_of(*([good] * 8), any_json)


# Pids of a parent table: often from a handful, so entries share parents and loop.
linked_pid = st.one_of(st.integers(1, 8), st.integers(1, 4_194_304))


def parent() -> st.SearchStrategy[dict[str, Any]]:
    """One entry of a sample's ``parents`` table: pid, its parent's pid, ``comm`` name."""
    return st.fixed_dictionaries(
        {
            "pid": ident(linked_pid),
            "ppid": ident(st.one_of(st.just(0), linked_pid)),
            "name": ident(hostile_text),
        }
    )


def process() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"pid": ident(st.integers(1, 4_194_304))},
        optional={
            "uid": field(st.integers(0, 70_000)),
            "user": field(hostile_text),
            "command": field(hostile_text),
            "gpu_mem_mib": field(st.integers(0, 200_000)),
            "start_ticks": field(st.integers(0, 10**12)),
            "start_time": field(st.floats(1.6e9, 1.8e9)),
            "container": field(hostile_text),
            "ppid": field(st.one_of(st.just(0), linked_pid)),
            "kind": field(st.sampled_from(["compute", "graphics"])),
        },
    )


def nvlink(link: int) -> st.SearchStrategy[dict[str, Any]]:
    count = st.integers(0, 10**7)
    return st.fixed_dictionaries(
        {"link": ident(st.just(link))},
        optional={
            "active": field(st.booleans()),
            "replay_errors": field(count),
            "recovery_errors": field(count),
            "crc_flit_errors": field(count),
            "crc_data_errors": field(count),
            "errors": field(st.dictionaries(hostile_text, hostile_text, max_size=3)),
        },
    )


# The health readings of a sample that has them (``health_read``), as a real card's.
HEALTH_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "health_read": st.booleans(),
    "remapped_correctable": st.integers(0, 512),
    "remapped_uncorrectable": st.integers(0, 512),
    "remap_pending": st.booleans(),
    "remap_failed": st.booleans(),
    "retired_sbe": st.integers(0, 64),
    "retired_dbe": st.integers(0, 64),
    "retired_pending": st.booleans(),
    "ecc_corrected_total": st.integers(0, 10**9),
    "ecc_uncorrected_total": st.integers(0, 10**4),
    "persistence": st.booleans(),
    "pcie_replays": st.integers(0, 10**6),
    "nvlinks": st.integers(0, 20)
    .flatmap(lambda n: st.tuples(*(nvlink(i) for i in range(n))))
    .map(list),
    "fabric_state": st.sampled_from(["not-supported", "not-started", "in-progress", "completed"]),
    "fabric_status": st.sampled_from(["NotReady", "Unknown", "ResetRequired"]),
}


def gpu(index: int) -> st.SearchStrategy[dict[str, Any]]:
    percent = st.integers(0, 100)
    return st.fixed_dictionaries(
        {
            "index": ident(st.just(index)),
            "uuid": ident(st.just(f"GPU-{index:08d}-0000-0000-0000-000000000000")),
        },
        optional={
            "state": field(st.sampled_from(["ok", "lost", "error"])),
            "message": field(hostile_text),
            "util_gpu": field(percent),
            "util_mem": field(percent),
            "mem_used_mib": field(st.integers(0, 81_920)),
            "mem_total_mib": field(st.integers(0, 143_771)),
            "temp_c": field(st.integers(20, 95)),
            "power_w": field(st.floats(10, 700)),
            "power_limit_w": field(st.floats(100, 700)),
            "fan_pct": field(percent),
            "clock_sm_mhz": field(st.integers(0, 2_100)),
            "clock_mem_mhz": field(st.integers(0, 10_501)),
            "throttle": field(st.lists(hostile_text, max_size=3)),
            "ecc_corrected": field(st.integers(0, 10**6)),
            "ecc_uncorrected": field(st.integers(0, 10)),
            "pcie_gen": field(st.integers(1, 5)),
            "pcie_width": field(st.sampled_from([1, 4, 8, 16])),
            "processes": field(st.lists(process(), max_size=3)),
            "errors": field(st.dictionaries(hostile_text, hostile_text, max_size=3)),
            **{name: field(good) for name, good in HEALTH_FIELDS.items()},
        },
    )


def gpus(entry: Any) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.integers(0, 4).flatmap(lambda n: st.tuples(*(entry(i) for i in range(n)))).map(list)


def gpu_info(index: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "index": ident(st.just(index)),
            "uuid": ident(st.just(f"GPU-{index:08d}-0000-0000-0000-000000000000")),
        },
        optional={
            "name": hostile_text,
            "memory_total_mib": field(st.integers(0, 143_771)),
            "power_limit_w": field(st.floats(100, 700)),
            "pcie_max_gen": field(st.integers(1, 5)),
            "pcie_max_width": field(st.sampled_from([8, 16])),
            "mig_mode": field(st.booleans()),
            "pci_bus_id": field(hostile_text),
            "serial": field(hostile_text),
            "temp_slowdown_c": field(st.integers(80, 100)),
            "temp_shutdown_c": field(st.integers(85, 105)),
            "errors": field(st.dictionaries(hostile_text, hostile_text, max_size=3)),
        },
    )


def sample(seq: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "type": st.just("sample"),
            "seq": seq if seq is not None else field(st.integers(0, 10**9)),
        },
        optional={
            "time": field(st.floats(1.6e9, 1.8e9)),
            "gpus": ident(gpus(gpu)),
            "parents": field(st.lists(parent(), max_size=10)),
            "notes": field(st.lists(hostile_text, max_size=3)),
        },
    )


def hello() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "type": st.just("hello"),
            "protocol": st.just(1),
            "helper_version": st.just("0.1.0"),
            "hostname": ident(hostile_text),
        },
        optional={
            "driver": field(hostile_text),
            "cuda": field(hostile_text),
            "nvml": field(hostile_text),
            "simulated": field(st.booleans()),
            "signal_method": field(hostile_text),
            "boot_time": field(st.floats(1.6e9, 1.8e9)),
            "gpus": ident(gpus(gpu_info)),
            "errors": field(st.dictionaries(hostile_text, hostile_text, max_size=3)),
        },
    )


def event() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("event"), "kind": field(st.just("xid"))},
        optional={
            "time": field(st.floats(1.6e9, 1.8e9)),
            "source": field(st.sampled_from(["nvml", "kernel-log", "helper"])),
            "gpu_uuid": field(hostile_text),
            "gpu_index": field(st.integers(0, 7)),
            "pci_bus_id": field(hostile_text),
            "xid": field(st.sampled_from([13, 31, 43, 48, 63, 74, 79, 94, 119])),
            "text": field(hostile_text),
        },
    )


def job_state() -> st.SearchStrategy[dict[str, Any]]:
    states = ["starting", "running", "exited", "failed-to-start", "lost", "paused"]
    return st.fixed_dictionaries(
        {
            "job_id": ident(st.integers(1, 2**53)),
            "state": ident(st.sampled_from(states)),
        },
        optional={
            "pid": field(st.integers(1, 4_194_304)),
            "start_ticks": field(st.integers(0, 10**12)),
            "exit_code": field(st.integers(0, 255)),
            "signal": field(st.sampled_from(["KILL", "TERM"])),
            "started_at": field(st.floats(1.6e9, 1.8e9)),
            "ended_at": field(st.floats(1.6e9, 1.8e9)),
            "timed_out": field(st.booleans()),
            "log_path": field(hostile_text),
            "error": field(hostile_text),
        },
    )


def jobs() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("jobs")},
        optional={
            "jobs": field(st.lists(job_state(), max_size=4)),
            "notes": field(st.lists(hostile_text, max_size=3)),
        },
    )


def message() -> st.SearchStrategy[dict[str, Any]]:
    junk_type = any_json.map(lambda kind: {"type": kind, "seq": 1, "time": 1.7e9})
    return st.one_of(sample(), hello(), event(), jobs(), junk_type)


def line(obj: Any) -> str:
    """JSON as a helper might write it, NaN and Infinity included."""
    return json.dumps(obj, allow_nan=True)


def is_safe_text(text: str) -> bool:
    """No ESC or other C0 control, no DEL or C1 control, no bidi override."""
    return not any(
        ch < " "
        or "\x7f" <= ch <= "\x9f"
        or "\u202a" <= ch <= "\u202e"
        or "\u2066" <= ch <= "\u2069"
        for ch in text
    )
