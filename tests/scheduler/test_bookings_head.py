"""Bookings on a real head (real SQLite file, real socket, scripted hosts, a clock the
test moves): the pass keeps work that would run into a booking off its cards, lets
preemptible work on and preempts it at the start with a notice, the booking becomes
its booker's claim, and an unused one is released after the claim idle time. A
conflict is refused in one line naming the booking in the way."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll, refusal

from gputui.cli import verbs
from gputui.scheduler.head.actions import Rules, run_key

HOST = "gpu01"
IDLE_S = 600.0


def _job(c: LineClient, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = c.ok("show", {"job_id": job_id})["job"]
    return found


def _submit(c: LineClient, gpus: int, **more: Any) -> int:
    ident: int = c.ok("submit", {"argv": ["train"], "gpus": gpus, **more})["job"]["id"]
    return ident


def _running(c: LineClient, job_id: int) -> set[str]:
    poll(
        lambda: _job(c, job_id)["state"] == "running",
        what=f"job {job_id} running {_job(c, job_id)}",
    )
    return set(_job(c, job_id)["gpu_uuids"])


def _refused(c: LineClient, op: str, args: dict[str, Any]) -> tuple[str, str]:
    return refusal(c.ask(op, args, rid=f"r{time.monotonic_ns()}"))


def _booking(c: LineClient, ident: int) -> dict[str, Any]:
    found = [b for b in c.ok("bookings", {"all": True})["bookings"] if b["id"] == ident]
    assert len(found) == 1
    return found[0]


def test_a_booking_is_honoured_then_becomes_a_claim_then_is_released_idle(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    rules = Rules(claim_idle_s=IDLE_S)
    with (
        ThreadedHead(tmp_path, {HOST: 4}, clock=clock, rules=rules) as th,
        LineClient(th.sock) as c,
    ):
        assert th.hosts is not None
        hosts = th.hosts
        start = clock() + 3600
        made = c.ok(
            "book", {"gpus": 2, "start": start, "duration_s": 7200, "note": "paper deadline"}
        )["booking"]
        booked = set(made["gpu_uuids"])
        assert made["state"] == "booked" and len(booked) == 2 and made["note"] == "paper deadline"

        # One card of it, in an overlapping window: refused in one line naming it.
        code, message = _refused(
            c, "book", {"gpu_refs": [sorted(booked)[0]], "start": start + 60, "duration_s": 60}
        )
        assert code == "conflict"
        assert f"booking {made['id']} of root" in message

        # Work with no time limit goes on the other two cards; more of it waits, while
        # work that ends before the start takes the booked cards.
        free = _submit(c, 2)
        assert _running(c, free).isdisjoint(booked)
        blocked = _submit(c, 2)
        short = _submit(c, 2, time_limit_s=1800)
        assert _running(c, short) == booked
        assert _job(c, blocked)["state"] == "queued"

        # The short one ends; preemptible work may use the booked cards until the start
        # (this one, limited to end before the booking does, delays no one: the
        # waiting job's reservation is at the booking's end).
        th.in_loop(lambda: hosts.finish(HOST, run_key(short, 1)))
        poll(lambda: _job(c, short)["state"] == "completed", what="the short job done")
        into = _submit(c, 2, time_limit_s=5400)  # would run into it: not preemptible
        loose = _submit(c, 2, preemptible=True, time_limit_s=5400)
        assert _running(c, loose) == booked
        assert _job(c, blocked)["state"] == _job(c, into)["state"] == "queued"

        # The start: the preemptible job is preempted, with a notice naming the booking,
        # and the cards become root's claim.
        clock.advance(3600)
        poll(lambda: _job(c, loose)["requeues"] == 1, what="the preemptible job preempted")
        told = c.ok("notices", {"all": True})["notices"]
        assert any(
            f"job {loose}" in n["text"] and f"booking {made['id']} of root starts" in n["text"]
            for n in told
        ), told
        now_on = poll(lambda: _booking(c, made["id"])["claim_id"], what="the booking's claim made")
        claims = {x["id"]: x for x in c.ok("claims")["claims"]}
        poll(
            lambda: {x["id"]: x for x in c.ok("claims")["claims"]}[now_on]["state"] == "active",
            what="the booking's claim granted",
        )
        claims = {x["id"]: x for x in c.ok("claims")["claims"]}
        assert set(claims[now_on]["gpu_uuids"]) == booked
        assert _booking(c, made["id"])["state"] == "active"
        assert _job(c, loose)["state"] == "queued" and _job(c, blocked)["state"] == "queued"

        # Nobody uses it: released after the claim idle time, and the booking with it.
        clock.advance(IDLE_S + 1)
        poll(
            lambda: _booking(c, made["id"])["state"] == "released",
            what="the unused booking released",
        )
        assert "idle" in (_booking(c, made["id"])["end_reason"] or "")
        # Its cards are free for the queue again.
        poll(lambda: _job(c, blocked)["state"] == "running", what="the waiting job placed")
        assert th.problems == []


def test_unbook_a_maintenance_window_and_bad_input_each_get_one_line(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 4}) as th, LineClient(th.sock) as c:
        now = time.time()
        maint = c.ok(
            "book",
            {"gpus": 4, "start": now, "duration_s": 3600, "maint": True, "reason": "new PSU"},
        )["booking"]
        assert maint["maint"] is True
        job = _submit(c, 1)
        poll(lambda: _job(c, job)["reason"] == "Drained", what="the job waiting: Drained")
        audit = c.ok("audit", {"limit": 50})
        assert any(r["action"] == "book-maint" for r in audit["rows"]), audit
        for args, code in (
            ({"gpus": 1, "start": now - 86400, "duration_s": 60}, "bad-args"),
            ({"gpus": 9, "start": now, "duration_s": 60}, "impossible"),
            ({"gpus": 1, "start": now, "duration_s": 60, "pool": "nope"}, "impossible"),
            ({"gpu_refs": ["gpu01:0"], "start": now, "duration_s": 60}, "conflict"),
        ):
            assert _refused(c, "book", args)[0] == code, args
        assert _refused(c, "unbook", {"booking_id": 999})[0] == "unknown-booking"
        c.ok("unbook", {"booking_id": maint["id"]})
        assert _booking(c, maint["id"])["state"] == "cancelled"
        assert _running(c, job)
        assert c.ok("bookings")["bookings"] == []
        assert th.problems == []


def test_the_booking_verbs_and_the_weekly_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ThreadedHead(tmp_path, {HOST: 4}) as th:
        sock = str(th.sock)
        argv = ["--socket", sock, "book", "-g", "2", "--from", "+1d", "--for", "2d"]
        assert verbs.main([*argv, "--note", "paper deadline"]) == 0
        said = capsys.readouterr().out
        assert said.startswith("booking b1: 2 GPU(s) on gpu01, ")
        # The same cards are taken: the next two are the other two; then none are left.
        assert (
            verbs.main(["--socket", sock, "book", "-g", "2", "--from", "+1d", "--for", "2d"]) == 0
        )
        capsys.readouterr()
        assert (
            verbs.main(["--socket", sock, "book", "-g", "1", "--from", "+2d", "--for", "1h"]) == 1
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "booking b1" not in err[0] and "booking 1 of root" in err[0]
        assert (
            verbs.main(["--socket", sock, "book", "-g", "1", "--from", "someday", "--for", "1h"])
            == 2
        )
        assert "--from: not a time: 'someday'" in capsys.readouterr().err
        assert verbs.main(["--socket", sock, "bookings", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [(b["id"], b["note"], b["state"]) for b in listed] == [
            (1, "paper deadline", "booked"),
            (2, "", "booked"),
        ]
        assert verbs.main(["--socket", sock, "bookings"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[:4] == ["BOOKING", "USER", "STATE", "GPUS"]
        assert table[1].startswith("b1 ") and "paper deadline" in table[1]
        assert verbs.main(["--socket", sock, "unbook", "b2"]) == 0
        assert capsys.readouterr().out == "unbooked b2\n"
        assert verbs.main(["--socket", sock, "report", "--week"]) == 0
        report = capsys.readouterr().out.splitlines()
        assert report[-2] == "- Bookings next week:"
        assert report[-1].startswith("  - b1 root: 2 GPU on gpu01, ")
        assert report[-1].endswith("(paper deadline)")
        assert th.problems == []


def test_jobs_queued_for_a_booking_run_on_its_cards_from_its_start(tmp_path: Path) -> None:
    clock = SettableClock()
    with ThreadedHead(tmp_path, {HOST: 4}, clock=clock) as th, LineClient(th.sock) as c:
        start = clock() + 3600
        made = c.ok("book", {"gpus": 2, "start": start, "duration_s": 7200})["booking"]
        booked = set(made["gpu_uuids"])
        mine = _submit(c, 2, booking=made["id"])
        other = _submit(c, 2)  # takes the other two cards at once
        assert _running(c, other).isdisjoint(booked)
        assert _job(c, mine)["state"] == "queued"  # not before its booking's start
        assert _refused(c, "submit", {"argv": ["x"], "gpus": 1, "booking": 99})[0] == (
            "unknown-booking"
        )
        clock.advance(3601)
        assert _running(c, mine) == booked
        assert _booking(c, made["id"])["state"] == "active"
        assert _booking(c, made["id"])["claim_id"] is None  # the job has the cards
        assert _job(c, mine)["requeues"] == 0  # its own booking never preempts it
        assert th.problems == []
