"""The head reads its bookings again (``bookings.tick``) only when one's start or end
is due or bookings changed, not in every writer batch: on a real head (real SQLite
file, real socket, scripted hosts, a clock the test moves) a booking still starts
and ends on time, one whose claim is released ends with it at once, and the batches
between its edges leave the bookings unread."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll

from gputui.scheduler.head import bookings
from gputui.scheduler.head.actions import Rules

HOST = "gpu01"


def _booking(c: LineClient, ident: int) -> dict[str, Any]:
    found = [b for b in c.ok("bookings", {"all": True})["bookings"] if b["id"] == ident]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each ``bookings.tick`` ran (the head's clock): the real one, counted."""
    ran: list[float] = []
    real = bookings.tick

    def counted(tx: Any, ctx: Any) -> bookings.Ticked:
        ran.append(ctx.now)
        return real(tx, ctx)

    monkeypatch.setattr(bookings, "tick", counted)
    return ran


def _batches(c: LineClient, n: int) -> None:
    """``n`` writer batches (each request a batch of its own, the timer's between)."""
    for _ in range(n):
        c.ok("whoami")


def test_a_booking_starts_and_ends_on_time_and_no_batch_between_reads_it(
    tmp_path: Path, ticks: list[float]
) -> None:
    clock = SettableClock()
    # No idle release in this window: the booking's claim stays until its end.
    rules = Rules(claim_idle_s=86400.0)
    with (
        ThreadedHead(tmp_path, {HOST: 4}, clock=clock, rules=rules) as th,
        LineClient(th.sock) as c,
    ):
        start = clock() + 3600
        made = c.ok("book", {"gpus": 2, "start": start, "duration_s": 1800})["booking"]
        read = len(ticks)
        assert read >= 1  # the batch that made it read the bookings
        _batches(c, 20)
        assert _booking(c, made["id"])["state"] == "booked"
        assert len(ticks) == read, "batches with no booking edge due read the bookings"

        # Just before its start: still booked, and still nothing read.
        clock.advance(start - clock() - 30)
        _batches(c, 5)
        assert _booking(c, made["id"])["state"] == "booked"
        assert len(ticks) == read

        # Its start: the first batch after it starts it (a claim of the booker's).
        clock.advance(31)
        on = poll(lambda: _booking(c, made["id"])["claim_id"], what="the booking started")
        assert ticks[read] >= start
        assert _booking(c, made["id"])["state"] == "active"
        assert on in {x["id"] for x in c.ok("claims")["claims"]}
        read = len(ticks)
        _batches(c, 10)
        assert len(ticks) == read, "an active booking read again before its end"

        # Its end: over, and its claim with it.
        clock.advance(start + 1800 - clock() + 1)
        poll(lambda: _booking(c, made["id"])["state"] == "done", what="the booking ended")
        assert "window ended" in (_booking(c, made["id"])["end_reason"] or "")
        assert on not in {x["id"] for x in c.ok("claims")["claims"]}
        assert th.problems == []


def test_a_booking_whose_claim_is_released_is_over_in_the_next_batch(
    tmp_path: Path, ticks: list[float]
) -> None:
    clock = SettableClock()
    with (
        ThreadedHead(tmp_path, {HOST: 4}, clock=clock, rules=Rules(claim_idle_s=86400.0)) as th,
        LineClient(th.sock) as c,
    ):
        made = c.ok("book", {"gpus": 2, "start": clock(), "duration_s": 7200})["booking"]
        on = poll(lambda: _booking(c, made["id"])["claim_id"], what="the booking started")
        poll(
            lambda: {x["id"]: x for x in c.ok("claims")["claims"]}[on]["state"] == "active",
            what="the booking's claim granted",
        )
        c.ok("release", {"claim_ids": [on]}, rid=f"r{time.monotonic_ns()}")
        # Long before its end: the release alone makes the head read the bookings.
        poll(lambda: _booking(c, made["id"])["state"] == "released", what="the booking over")
        assert f"claim {on} ended" in (_booking(c, made["id"])["end_reason"] or "")
        read = len(ticks)
        _batches(c, 10)
        assert len(ticks) == read  # no booking left: nothing is due
        # A new booking is honoured at once (its cards are kept from a claim).
        later = c.ok("book", {"gpus": 4, "start": clock() + 600, "duration_s": 600})["booking"]
        assert len(ticks) == read + 1
        head = th.head
        assert head is not None
        # What the writer keeps for the next batches (once the batch is committed).
        kept = poll(
            lambda: (t := head.batch.booked) is not None and [b.id for b in t.booked] and t,
            what="the new booking kept",
        )
        assert [b.id for b in kept.booked] == [later["id"]]
        assert kept.due == pytest.approx(later["start"])
        assert th.problems == []
