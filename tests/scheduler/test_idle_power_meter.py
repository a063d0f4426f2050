"""Held-but-idle accounting (``power.mode`` report or lock): the meter's arithmetic on
a day worked out by hand, through the real SQLite store and the ``usage`` and
``report`` answers; and, for any run of samples, the rule itself (the first
``idle_minutes`` of an idle stretch are grace, a change of holder starts again).

Samples come one a minute, each covering the minute before it (on a meter whose gap
limit lets one sample count for a minute); the clock is the test's: nothing sleeps.
"""

from __future__ import annotations

import calendar
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.cli.usage import report_text, usage_csv, usage_table
from gputui.config.scheduler import Accounting, Power, SchedulerConfig
from gputui.scheduler.head import usage_reads
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.meter import Holder, Meter, Metered, Reading
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.server.read_args import ReportArgs, UsageArgs
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.ui.head.usage_view import UsageReport

T0 = float(calendar.timegm((2026, 11, 30, 0, 0, 0)))
"""A Monday, 00:00 UTC."""
H = 3600.0
STEP = 60.0
A, B = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"
ALICE = Holder("alice", "vision", "", "a40", T0)
BOB = Holder("bob", "vision", "", "a40", T0)
CAROL = Holder("carol", "speech", "", "a40", T0 + 6 * H, job=7)


def card_a(start: float) -> tuple[float, float, float]:
    """GPU A (alice's claim all day): (util %, memory activity %, W) over the minute
    from ``start``: idle 00-02, busy 02-10, idle 20 min, then copying memory (0 % util,
    15 % memory activity) to 12, then idle to midnight."""
    t = (start - T0) / H
    if t < 2 or 10 <= t < 10 + 20 / 60 or t >= 12:
        return 0.0, 0.0, 110.0
    if t >= 10:
        return 0.0, 15.0, 150.0
    return 80.0, 20.0, 250.0


def day() -> Meter:
    """The day: A as above; B idle at 60 W all day, bob's claim until 06:00, then
    carol's job 7."""
    meter = Meter(max_gap_s=2 * STEP, idle_after_s=30 * 60)
    for n in range(24 * 60 + 1):
        at = T0 + n * STEP
        util, mem, watts = card_a(at - STEP)
        if at < T0 + 6 * H:
            b_holder = BOB
        elif at == T0 + 6 * H:  # the sample after bob's claim ended: charged to its end
            b_holder = Holder("bob", "vision", "", "a40", T0, until=T0 + 6 * H)
        else:
            b_holder = CAROL
        readings = [Reading(A, util, watts, mem), Reading(B, 0, 60.0, 0)]
        meter.observe("gpu01", object(), readings, at, {A: ALICE, B: b_holder})
    return meter


# By hand (kWh = W x s / 3.6e6):
# alice: 00:30-02:00 (1.5 h) + 12:30-24:00 (11.5 h) = 13 h at 110 W = 1.43 kWh;
#        10:00-10:20 is idle only 20 min, under the 30, and 10:20-12:00 moves memory:
#        not counted.
# bob:   00:30-06:00 = 5.5 h at 60 W = 0.33 kWh.
# carol: from her start at 06:00, grace to 06:30, then to 24:00 = 17.5 h at 60 W = 1.05 kWh.
BY_USER = {"alice": (13.0, 1.43), "bob": (5.5, 0.33), "carol": (17.5, 1.05)}
BY_GROUP = {"vision": (18.5, 1.76), "speech": (17.5, 1.05)}
PRICE = 0.30


def _check(totals: list[dict[str, Any]], wanted: dict[str, tuple[float, float]]) -> None:
    got = {t["key"]: t for t in totals if t["idle_held_kwh"] > 0}
    assert set(got) == set(wanted)
    for key, (hours, kwh) in wanted.items():
        assert got[key]["idle_held_gpu_h"] == pytest.approx(hours, abs=1e-6), key
        assert got[key]["idle_held_kwh"] == pytest.approx(kwh, abs=1e-6), key
        assert got[key]["idle_held_cost"] == pytest.approx(kwh * PRICE, abs=1e-6), key
        assert got[key]["idle_held_kwh"] <= got[key]["energy_kwh"] + 1e-9


def test_a_hand_computed_day() -> None:
    taken = day().take()
    idle = accounting.gather_idle([], taken.idle_rows(), since=T0, until=T0 + 24 * H)
    usage = accounting.gather([], [], taken.usage_rows(), since=T0, until=T0 + 24 * H, now=T0)
    prices = accounting.Prices(PRICE)
    _check(accounting.summarize(usage, "user", prices, idle)["totals"], BY_USER)
    _check(accounting.summarize(usage, "group", prices, idle)["totals"], BY_GROUP)
    hours = {
        k[0]: round(v[0]) for k, v in taken.idle.items() if k[1] == "alice"
    }  # split by UTC hour
    assert hours == {
        T0: 1800,
        T0 + H: 3600,
        T0 + 12 * H: 1800,
        **{T0 + h * H: 3600 for h in range(13, 24)},
    }
    job = taken.jobs[7]  # carol's job: its own energy holds her idle energy too
    assert job[1] == pytest.approx(18 * H * 60.0)


def test_the_day_through_the_store_usage_and_report(tmp_path: Path) -> None:
    store = SqlStore(open_store(tmp_path / "db" / "gputui.db"))
    taken = day().take()
    quarter = [(k, s / 4, e / 4) for k, s, e in taken.idle_rows()]
    with store.transaction() as tx:  # a quarter in each of two flushes (the same rows)
        tx.usage.add_metered(taken.usage_rows(), taken.cluster_rows(), taken.job_rows(), quarter)
    with store.transaction() as tx:
        tx.usage.add_metered([], [], [], quarter)
    pending = Metered(idle={k: [s / 2, e / 2] for k, s, e in taken.idle_rows()})  # not flushed
    sched = SchedulerConfig(accounting=Accounting(price_per_kwh=PRICE), power=Power(mode="report"))
    now, span = T0 + 24 * H, {"since": T0, "until": T0 + 24 * H}
    with store.snapshot() as tx:
        by_user = usage_reads.usage(tx, UsageArgs(**span, by="user"), sched, pending, now)
        by_group = usage_reads.usage(tx, UsageArgs(**span, by="group"), sched, pending, now)
        report = usage_reads.report(
            tx, ReportArgs(**span), sched, pending, now, standing=Standing()
        )
        off = usage_reads.usage(
            tx, UsageArgs(**span), SchedulerConfig(power=Power(mode="off")), pending, now
        )
    _check(by_user["totals"], BY_USER)
    _check(by_group["totals"], BY_GROUP)
    assert report["total"]["idle_held_kwh"] == pytest.approx(1.43 + 0.33 + 1.05, abs=1e-6)
    assert report["total"]["idle_held_cost"] == pytest.approx(2.81 * PRICE, abs=1e-6)
    assert "idle_held_kwh" not in off["totals"][0] and off["power_mode"] == "off"
    store.close()


# -- the rule, for any run ---------------------------------------------------------------

RUNS = st.lists(
    st.tuples(st.booleans(), st.integers(min_value=0, max_value=2)),  # idle?, holder
    min_size=1,
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(runs=RUNS, after_min=st.integers(min_value=1, max_value=40))
def test_held_idle_is_each_idle_stretch_past_its_grace(
    runs: list[tuple[bool, int]], after_min: int
) -> None:
    """One minute a sample; a stretch: minutes in a row idle under one holder (holder
    2 is nobody). Held idle = the sum over stretches of (length - grace) when longer."""
    after = after_min * 60.0
    holders = {0: Holder("u0", "g", "", "p", T0 - 1e6), 1: Holder("u1", "g", "", "p", T0)}
    meter = Meter(max_gap_s=2 * STEP, idle_after_s=after)
    meter.observe("h", object(), [Reading(A, 0, 100.0)], T0, {})
    last: int | None = None
    for n, (idle, who) in enumerate(runs, start=1):
        if who != last and who in holders:  # a new allocation starts as it changes
            holders[who] = Holder(f"u{who}", "g", "", "p", T0 + (n - 1) * STEP)
        last = who
        held = {A: holders[who]} if who in holders else {}
        reading = Reading(A, 0 if idle else 50, 100.0, 0)
        meter.observe("h", object(), [reading], T0 + n * STEP, held)
    expected, length, previous = 0.0, 0, None
    for idle, who in [*runs, (False, 2)]:
        if idle and who != 2 and who == previous:
            length += 1
        else:
            expected += max(0.0, length * STEP - after)
            length = 1 if idle and who != 2 else 0
        previous = who
    got = sum(v[0] for v in meter.pending.idle.values())
    assert got == pytest.approx(expected, abs=1e-6)
    assert sum(v[1] for v in meter.pending.idle.values()) == pytest.approx(100.0 * got)
    for key, (seconds, joules) in meter.pending.idle.items():
        _busy, energy = meter.pending.usage[key]
        assert seconds <= 3600 and joules <= energy + 1e-6


def test_the_cli_shows_idle_held_kwh_per_user_in_80_columns_csv_and_the_report(
    tmp_path: Path,
) -> None:
    taken = day().take()
    store = SqlStore(open_store(tmp_path / "db" / "gputui.db"))
    sched = SchedulerConfig(accounting=Accounting(price_per_kwh=PRICE), power=Power(mode="lock"))
    now, span = T0 + 24 * H, {"since": T0, "until": T0 + 24 * H}
    with store.snapshot() as tx:
        result = usage_reads.usage(tx, UsageArgs(**span, by="user"), sched, taken, now)
        report = usage_reads.report(tx, ReportArgs(**span), sched, taken, now, standing=Standing())
    store.close()
    lines = usage_table(result, daily=False, width=80)
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].split()[-2:] == ["IDLE", "KWH"]
    shown = {line.split()[0]: line.split()[-1] for line in lines[1:]}
    assert shown == {"alice": "1.43", "carol": "1.05", "bob": "0.33", "TOTAL": "2.81"}
    rows = usage_csv(result, daily=False)
    assert rows[0][-4:] == ["idle_held_gpu_h", "idle_held_kwh", "idle_held_cost", "currency"]
    by_user = {r[0]: float(r[rows[0].index("idle_held_kwh")]) for r in rows[1:]}
    assert by_user == pytest.approx({"alice": 1.43, "bob": 0.33, "carol": 1.05})
    (line,) = [x for x in report_text(report) if x.startswith("- Held but idle")]
    assert line == (
        "- Held but idle: 36.0 GPU-h, 2.8 kWh, cost 0.84 EUR"
        " (most: alice 1.4 kWh, carol 1.1 kWh, bob 0.3 kWh)"
    )
    console = UsageReport.parse(result, since=T0, until=T0 + 24 * H)  # the usage screen's
    assert console.total.idle_held_kwh == pytest.approx(2.81, abs=1e-6)
    assert {t.key: round(t.idle_held_kwh, 6) for t in console.totals}["carol"] == 1.05
    plain = {**result, "power_mode": "off"}
    assert "IDLE" not in usage_table(plain, daily=False, width=200)[0]
    assert "idle_held_kwh" not in usage_csv(plain, daily=False)[0]
