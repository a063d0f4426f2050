"""Every table a verb prints fits the terminal (``COLUMNS``): at 80 columns no line is
longer, with long, realistic values in every field; what gives way is chosen (free
text cut with "…", then the least important columns), and a pipe gets whole rows."""

from __future__ import annotations

import io
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.cli import layout
from gputui.cli.flagged import flags_table
from gputui.cli.health import as_text
from gputui.cli.incident import Entry, timeline_lines
from gputui.cli.layout import fit_table, terminal_width
from gputui.cli.tables import audit_table, claims_table, queue_table, unavailable_table
from gputui.cli.usage import usage_table
from gputui.health.board import Problem
from gputui.health.finding import Finding

NOW = 1_700_000_000.0
LONG_USER = "alexandra.k"
JOBS = [
    {
        "id": 12345,
        "user": LONG_USER,
        "name": "resnet152-imagenet-sweep-lr3e-4",
        "state": "pending",
        "gpus": 8,
        "host": "dgx-a100-rack3-node07",
        "reason": "Resources: 8 GPUs on one host in pool a100-80g, none free until job 12001 ends",
        "started_at": None,
    },
    {
        "id": 12001,
        "user": "bob",
        "name": "llama-finetune",
        "state": "running",
        "gpus": 2,
        "host": "gpu01",
        "started_at": NOW - 3 * 86400 - 5000,
        "idle_since": NOW - 7600,
    },
]
CLAIMS = [
    {
        "id": 4321,
        "user": LONG_USER,
        "state": "released",
        "reason": "idle for 2h (the head's idle release)",
        "gpu_uuids": ["GPU-1", "GPU-2"],
        "host": "dgx-a100-rack3-node07",
        "created_at": NOW - 9000,
        "expires_at": NOW + 86400,
        "note": "debugging the NCCL hang in the all-reduce, please keep",
    }
]
AUDIT = [
    {
        "time": NOW - 60,
        "user": "gputui-head",
        "action": "force-free",
        "target": "dgx-a100-rack3-node07:3",
        "owner": LONG_USER,
        "reason": "Xid 79 twice in an hour: the card fell off the bus, fenced until a reset",
        "outcome": "kill: SIGKILL sent to 3 processes, memory back to 0 MiB after 4 s",
    }
]
FLAGS = [
    {
        "user": LONG_USER,
        "host": "dgx-a100-rack3-node07",
        "gpu_index": 7,
        "pid": 4194303,
        "name": "python train.py --config configs/very/long/path.yaml",
        "kind": "outside-allocation",
        "since": NOW - 4000,
        "signal_at": NOW + 240,
        "next_signal": "TERM",
    }
]
UNAVAILABLE = [
    {
        "host": "dgx-a100-rack3-node07",
        "index": 3,
        "drain": {"by": LONG_USER, "since": NOW - 7200, "reason": "fan noise, waiting for a tech"},
        "fence": {"code": "xid-79", "since": NOW - 3600, "reason": "the card fell off the bus"},
    }
]
USAGE = {
    "by": "project",
    "currency": "EUR",
    "rows": [
        {
            "day": "2024-11-30",
            "key": "computer-vision-foundation-models",
            "alloc_gpu_h": 12345.678,
            "busy_gpu_h": 9876.54,
            "energy_kwh": 4321.09,
            "cost": 98765.43,
        }
    ],
    "totals": [
        {
            "key": "computer-vision-foundation-models",
            "alloc_gpu_h": 12345.678,
            "busy_gpu_h": 9876.54,
            "energy_kwh": 4321.09,
            "cost": 98765.43,
        }
    ],
}


class _Board:
    def __init__(self) -> None:
        finding = Finding(
            code="stray",
            severity="warn",
            host="dgx-a100-rack3-node07",
            gpu=3,
            title="STRAY: pid 4194303 (alexandra.k, python train.py --config x.yaml)",
            meaning="a process outside the GPUs of its owner's jobs and claims on this host",
            action="ask its owner to claim the GPU, or end it (T / K in the console)",
        )
        self._problems = [Problem(finding, NOW - 300, NOW, 12)]

    def problems(self) -> list[Problem]:
        return self._problems

    def unknown(self) -> dict[str, list[tuple[int, str, str]]]:
        return {"dgx-a100-rack3-node07": [(0, "ecc", "not supported by this card's driver")]}

    def not_applicable(self) -> dict[str, list[tuple[int, str]]]:
        return {}

    def worst(self) -> str:
        return "warn"


def _every_table(width: int | None) -> dict[str, list[str]]:
    entry = Entry(NOW, "xid", 3, "Xid 79 (hardware, kernel log): the GPU fell off the bus " * 2)
    return {
        "queue": queue_table(JOBS, NOW, 3600, width),
        "flags": flags_table(FLAGS, NOW, width),
        "unavailable": unavailable_table(UNAVAILABLE, NOW, width),
        "claims": claims_table(CLAIMS, NOW, width),
        "audit": audit_table(AUDIT, width),
        "usage": usage_table(USAGE, False, width),
        "usage --daily": usage_table(USAGE, True, width),
        "health": as_text(_Board(), 3, width).splitlines(),
        "incident": timeline_lines([entry], None, width),
    }


def test_columns_80_is_the_width_every_table_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    width = terminal_width()
    assert width == 80
    for verb, lines in _every_table(width).items():
        assert lines, verb
        for line in lines:
            assert layout.cells(line) <= 80, f"{verb}: {len(line)} cells: {line!r}"


def test_at_80_columns_what_matters_stays() -> None:
    tables = _every_table(80)
    # The audit keeps OWNER and OUTCOME (cut), the time to the minute.
    assert tables["audit"][0].split() == [
        "TIME", "ACTOR", "ACTION", "TARGET", "OWNER", "REASON", "OUTCOME"
    ]  # fmt: skip
    assert time.strftime("%m-%d %H:%M", time.localtime(NOW - 60)) in tables["audit"][1]
    # The queue keeps the job, its user, state, GPUs, time and why it waits.
    head = tables["queue"][0].split()
    assert head[:2] == ["JOBID", "USER"] and {"STATE", "GPUS", "TIME", "REASON"} <= set(head)
    assert "Idle 2h06m" in tables["queue"][2] or "Idle 2h" in tables["queue"][2]
    # health: WHAT TO DO leaves the table for a line under the problem's meaning.
    health = tables["health"]
    assert "WHAT TO DO" not in health[0]
    assert any("what to do: ask its owner" in line for line in health)
    # Wide, it is a column again, every value whole.
    wide = _every_table(None)
    assert "WHAT TO DO" in wide["health"][0]
    assert LONG_USER in wide["audit"][1] and "memory back to 0 MiB" in wide["audit"][1]
    assert "Resources: 8 GPUs on one host" in wide["queue"][1]


def test_a_pipe_gets_whole_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert terminal_width() is None
    for bad in ("0", "-5", "wide", "99999999", "12"):
        monkeypatch.setenv("COLUMNS", bad)
        assert terminal_width() is None  # not believed: the pipe's answer


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=150)
@given(
    st.lists(st.tuples(_TEXT, _TEXT, _TEXT, _TEXT), min_size=1, max_size=5),
    st.integers(20, 200),
    st.sets(st.integers(0, 3)),
)
def test_any_table_fits_any_width(rows: list[tuple[str, ...]], width: int, drop: set[int]) -> None:
    printable = [tuple("".join(c for c in cell if c.isprintable()) for cell in r) for r in rows]
    lines = fit_table(printable, width, flex={0: 4, 1: 4, 2: 4, 3: 4}, drop=sorted(drop))
    assert len(lines) == len(rows)
    assert all(layout.cells(line) <= width for line in lines)


def _reference_table(
    rows: list[tuple[str, ...]], width: int | None, flex: dict[int, int], drop: list[int]
) -> list[str]:
    """The layout measured cell by cell at every step (as it was before each cell's
    size was worked out once): the fast path must give exactly these lines."""
    cells, cut = layout.cells, layout.cut
    kept = list(range(len(rows[0])))
    while True:
        widths = {i: max(cells(r[i]) for r in rows) for i in kept}
        over = sum(widths.values()) + 2 * (len(kept) - 1) - (width or 0)
        if width is None or over <= 0:
            break
        floor = {i: max(least, cells(rows[0][i])) for i, least in flex.items() if i in widths}
        while over > 0:
            slack = [i for i in floor if widths[i] > floor[i]]
            if not slack:
                break
            widths[max(slack, key=lambda i: widths[i])] -= 1
            over -= 1
        gone = next((i for i in drop if i in kept), None)
        if over <= 0 or gone is None:
            break
        kept.remove(gone)
    out = []
    for row in rows:
        line = "  ".join(layout.pad(cut(row[i], w), w, right=i == 1) for i, w in widths.items())
        out.append(line.rstrip() if width is None else cut(line.rstrip(), width))
    return out


@settings(max_examples=300)
@given(
    st.lists(st.tuples(_TEXT, _TEXT, _TEXT, _TEXT), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 200), st.integers(20, 60)),
    st.lists(st.integers(0, 3), unique=True),
    st.dictionaries(st.integers(0, 3), st.integers(0, 20)),
)
def test_the_fast_layout_is_the_cell_by_cell_one(
    rows: list[tuple[str, ...]], width: int | None, drop: list[int], flex: dict[int, int]
) -> None:
    printable = [tuple("".join(c for c in cell if c.isprintable()) for cell in r) for r in rows]
    want = _reference_table(printable, width, flex, drop)
    assert fit_table(printable, width, flex=flex, drop=drop, right=(1,)) == want
    widths = layout.fit_widths(printable, width, flex=flex, drop=drop)
    assert layout.table_lines(printable, widths, width, right=(1,)) == want
