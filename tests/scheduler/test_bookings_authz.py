"""Who may book what, on a real head called by real Unix users: anyone within the
limits of ``scheduler.bookings`` (GPU-hours a week per group, how far ahead, how
long), never over cards others' non-preemptible work holds into the window, and
only admins a maintenance window or another's booking cancelled (with a reason)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import ThreadedHead, poll, refusal
from test_authz import ADMINS, People, people  # noqa: F401 (the fixture)

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head.actions import Rules

LIMITS = SchedulerConfig.model_validate(
    {"bookings": {"gpu_hours_per_week": 10, "max_days_ahead": 2, "max_hours": 24}},
    strict=False,
)
HOUR = 3600.0


@pytest.fixture
def th(people: People) -> Iterator[ThreadedHead]:  # noqa: F811 (the fixture)
    """A head whose socket the test users can reach (a 0755 directory under /tmp)."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-book-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        with ThreadedHead(tmp, {"gpu01": 4}, admin_group=ADMINS, rules=Rules(sched=LIMITS)) as head:
            yield head
            assert head.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _book(gpus: int, start: float, hours: float, **more: Any) -> dict[str, Any]:
    return {"gpus": gpus, "start": start, "duration_s": hours * HOUR, **more}


def test_anyone_books_within_the_limits_and_never_over_others_work(
    th: ThreadedHead,
    people: People,  # noqa: F811 (the fixture)
) -> None:
    sock, alice, bob, carol = th.sock, people.alice, people.bob, people.carol
    now = time.time()
    job = bob.ok(sock, "submit", {"argv": ["train"], "gpus": 2})["job"]["id"]
    poll(lambda: bob.ok(sock, "show", {"job_id": job})["job"]["state"] == "running")
    held = set(bob.ok(sock, "show", {"job_id": job})["job"]["gpu_uuids"])
    mine = alice.ok(sock, "book", _book(2, now + HOUR, 2, note="paper"))["booking"]
    assert set(mine["gpu_uuids"]).isdisjoint(held)  # not the cards bob's job holds
    # In her window the other cards are bob's (no end, not preemptible): the refusal
    # names the booking in the way.
    code, message = refusal(alice.call(sock, "book", _book(1, now + 2 * HOUR, 1)))
    assert code == "conflict" and f"booking {mine['id']} of {alice.name}" in message, message
    for args, code, words in (
        (_book(1, now + 10 * HOUR, 7), "limit", "over its 10 GPU-hours"),  # 4 + 7 > 10
        (_book(1, now + 3 * 86400, 1), "limit", "more than 2 days ahead"),
        (_book(1, now + HOUR, 25), "limit", "longer than 24 h"),
        (_book(1, now + HOUR, 1, maint=True), "denied", "for admins"),
        ({"gpu_refs": sorted(held)[:1], **_book(1, now + HOUR, 1)}, "busy", "not preemptible"),
    ):
        got, message = refusal(alice.call(sock, "book", args))
        assert (got, words in message) == (code, True), message
    # Not alice's to cancel; carol (an admin) may, with a reason, and alice is told.
    assert refusal(bob.call(sock, "unbook", {"booking_id": mine["id"]}))[0] == "denied"
    assert refusal(carol.call(sock, "unbook", {"booking_id": mine["id"]}))[0] == ("reason-required")
    carol.ok(sock, "unbook", {"booking_id": mine["id"], "reason": "the cluster is moving"})
    told = alice.ok(sock, "notices", {"all": True})["notices"]
    assert any(f"unbooked by {carol.name}" in n["text"] for n in told), told
    # An admin may book anything, over the limits and others' work.
    big = carol.ok(sock, "book", _book(4, now + HOUR, 30, maint=True, reason="PSU swap"))
    assert big["booking"]["maint"] is True and big["booking"]["note"] == "PSU swap"
