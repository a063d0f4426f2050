"""Drain, undrain and unfence are for admins only: real Unix users on a real head
socket (the accounts and the head of ``test_authz``; needs root, skips otherwise)."""

from __future__ import annotations

from headthread import ThreadedHead, poll, refusal
from test_authz import People, people, th  # noqa: F401  (the fixtures)

DRAIN_COLUMNS = (
    "SELECT uuid, drained_by, drain_reason, drained_at, fence_code FROM gpu ORDER BY uuid"
)


def _drains(head: ThreadedHead) -> dict[str, object]:
    return {
        "gpus": head.rows(DRAIN_COLUMNS),
        "hosts": head.rows("SELECT name, drained_by, drained_at FROM host ORDER BY name"),
        "audit": head.rows("SELECT id FROM audit ORDER BY id"),
    }


def test_a_non_admin_cannot_drain_undrain_or_unfence(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    before = {**th.snapshot(), **_drains(th)}
    answers = people.alice.calls(
        th.sock,
        ("drain", {"target": "gpu01", "reason": "mine now"}),
        ("drain", {"target": "gpu01:0", "reason": "mine now"}),
        ("undrain", {"target": "gpu01:1"}),
        ("unfence", {"target": "gpu01:2", "reason": "looks fine to me"}),
    )
    assert [refusal(a) for a in answers] == [
        ("denied", "drain gpu01: only an admin may drain"),
        ("denied", "drain gpu01:0: only an admin may drain"),
        ("denied", "undrain gpu01:1: only an admin may undrain"),
        ("denied", "unfence gpu01:2: only an admin may unfence"),
    ]
    assert {**th.snapshot(), **_drains(th)} == before


def test_an_admin_drains_with_a_reason_and_it_is_audited(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    carol = people.carol
    answer = carol.call(th.sock, "drain", {"target": "gpu01:1"})
    assert refusal(answer) == (
        "reason-required",
        "drain gpu01:1: give --reason (why, for the audit)",
    )
    done = carol.ok(th.sock, "drain", {"target": "gpu01:1", "reason": "  fan   noise "})
    assert done["outcome"] == "drained"
    assert th.rows("SELECT drained_by, drain_reason FROM gpu WHERE drained_at IS NOT NULL") == [
        ("gtu_carol", "fan noise")
    ]
    # Alice still cannot undo it, and her job does not go there.
    assert refusal(people.alice.call(th.sock, "undrain", {"target": "gpu01:1"}))[0] == "denied"
    job = people.alice.ok(th.sock, "submit", {"argv": ["x"], "gpus": 4})["job"]["id"]
    poll(
        lambda: th.rows("SELECT reason FROM job WHERE id = ?", job) == [("Drained",)],
        what="alice's job to wait with Drained",
    )
    carol.ok(th.sock, "undrain", {"target": "gpu01:1", "reason": "fan replaced"})
    assert th.rows("SELECT user, action, target, reason, outcome FROM audit ORDER BY id") == [
        ("gtu_carol", "drain", "gpu01:1", "fan noise", "drained"),
        ("gtu_carol", "undrain", "gpu01:1", "fan replaced", "undrained"),
    ]
    # Audit rows of admin actions on no one's work are for admins to read.
    assert people.alice.ok(th.sock, "audit")["rows"] == []
    assert len(carol.ok(th.sock, "audit")["rows"]) == 2
