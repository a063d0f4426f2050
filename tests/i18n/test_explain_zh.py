"""``gputui explain``'s lines and the queue pane's pairs, in Chinese: every branch (a
place in line, quotas over and within, dependencies, a reservation, an estimate with
its day, none and why, the cards passed over, the requests ahead), with no English
left but names; in English exactly the lines they were."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from untranslated import english_words

from gputui.common import i18n
from gputui.scheduler.client.explain_text import cells, explain_lines, explain_pairs, when

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

NOW = time.mktime((2026, 12, 3, 9, 0, 0, 0, 0, -1))  # a Thursday, local time
DATA = {"alice", "bob", "train", "normal", "urgent", "low", "night", "gpu", "ml", "a100"}


def body(
    *, over: bool, pool: bool, after_ok: bool, reserved: bool, start: bool, passed: bool
) -> dict[str, Any]:
    return {
        "job": {"id": 7, "name": "train", "user": "alice", "state": "queued"},
        "reason": "Resources",
        "position": 2,
        "in_line": 3,
        "factors": {
            "as_of": NOW - 5,
            "class": "normal", "class_rank": 2, "classes": ["urgent", "normal", "low", "night"],
            "fair_share": 0.5, "group": "ml", "usage_gpu_h": 12.0, "half_life_days": 7.0,
            "share": 1.0, "quotas": [
                {"pool": "a100" if pool else None, "over": over, "used_gpu_h": 3.0,
                 "limit_gpu_h": 10.0}
            ],
            "time_limit_s": 3600 if start else None, "preemptible": start,
            "off_hours_only": not start,
        },
        "dependencies": [{"id": 5, "state": "running"}],
        "after_ok": after_ok,
        "reservation": {"host": "gpu01", "start": NOW + 7200 if start else None}
        if reserved else None,
        "estimate": {"start": NOW + 90000, "host": "gpu01", "why": ""} if start else {
            "start": None, "host": None, "why": "not in line",
            "why_words": {"msg": "not in line", "args": {}},
        },
        "passed_over": [
            {"host": "gpu01", "index": 3, "never": not over, "why": "Xid 79"}
        ] if passed else [],
        "ahead": [
            {"kind": "job", "id": 3, "user": "bob", "gpus": 2, "class": "urgent",
             "fair_share": 0.9, "over_quota": over, "reason": "Priority"},
            {"kind": "claim", "id": 4, "user": "bob", "gpus": 1, "class": "normal",
             "fair_share": 0.9, "over_quota": False, "reason": ""},
        ],
        "ahead_count": 5,
    }  # fmt: skip


FLAGS = st.fixed_dictionaries(
    {k: st.booleans() for k in ("over", "pool", "after_ok", "reserved", "start", "passed")}
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flags=FLAGS)
def test_explain_reads_in_chinese_in_every_branch(chinese: None, flags: dict[str, bool]) -> None:
    lines = explain_lines(body(**flags), NOW)
    text = "\n".join(lines)
    assert english_words(text, DATA | {"ECC"}) == [], text
    assert "作业 7（train）" in text
    pairs = explain_pairs(body(**flags), NOW)
    shown = "\n".join(f"{label} {value}" for label, value in pairs)
    assert english_words(shown, DATA) == [], shown
    if flags["start"]:
        assert "12月04日" in text or "周五" in text  # the day, in Chinese
    # the requests ahead line up by display cells under their Chinese header
    at = next(i for i, line in enumerate(lines) if line.startswith("  排在它前面的"))
    header, first = lines[at + 1], lines[at + 2]
    for head, value in (("用户", "bob"), ("类别", "urgent"), ("份额", "0.900")):
        assert cells(header[: header.index(head)]) == cells(first[: first.index(value)]), head
    gpus = cells(header[: header.index("GPU数") + len("GPU数")])
    assert gpus == cells(first[: first.index(" 2 ") + 2])  # right-aligned under its header


def test_explain_in_english_is_the_lines_it_was() -> None:
    i18n.choose("en")
    try:
        lines = explain_lines(
            body(over=True, pool=True, after_ok=True, reserved=True, start=True, passed=True), NOW
        )
    finally:
        i18n.choose(None)
    at = time.strftime("%H:%M:%S", time.localtime(NOW - 5))
    assert lines[:12] == [
        "job 7 (train) of alice: queued",
        "  place in line: 2 of 3  reason: Resources: no host has enough free GPUs of the kind"
        " it asks for",
        f"  factors (the scheduler's, worked out at {at}):",
        "    class          normal (2 of 4: urgent, normal, low, night)",
        "    fair share     0.500  group ml: 12.0 GPU-h decayed (half-life 7 d), share 1",
        "    quota          OVER: 3.0 of 10 GPU-h this week (a100)",
        "    time limit     1:00:00; preemptible",
        "    after job 5 has completed: it is running",
        "  reservation: gpu01 from Thu 11:00 (in 2:00:00)",
        "  estimated start: Fri 10:00 (in 1-01:00:00) on gpu01",
        "  gpu3 on gpu01 passed over: Xid 79 (used last)",
        "  ahead of it (5):",
    ]
    assert lines[12:] == [
        "    ID       USER         GPUS CLASS    SHARE  REASON",
        "    j3       bob             2 urgent   0.900  Priority over-quota",
        "    c4       bob             1 normal   0.900  ",
        "    … and 3 more",
    ]


def test_when_names_the_day_in_the_readers_language(chinese: None) -> None:
    assert when(NOW + 3600, NOW) == "周四 10:00（1:00:00 后）"
    assert when(NOW - 1, NOW) == "现在"
    assert when(None, NOW) == "-"
