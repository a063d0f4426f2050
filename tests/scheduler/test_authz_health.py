"""Acknowledging a health problem is for admins only: real Unix users on a real head
socket (the accounts and the head of ``test_authz``; needs root, skips otherwise).
Anyone may read the board."""

from __future__ import annotations

from headthread import ThreadedHead, poll, refusal
from test_authz import People, people, th  # noqa: F401  (the fixtures)

KEY = "gpu01:2:throttle-hw_thermal"


def test_anyone_reads_the_board_only_an_admin_acknowledges(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    th.in_loop(
        lambda: th.hosts.put_fault("gpu01", 2, throttle=("hw_thermal",)) if th.hosts else None
    )
    alice, carol = people.alice, people.carol

    def keys() -> list[str]:
        return [p["key"] for p in alice.ok(th.sock, "health")["problems"]]

    poll(lambda: KEY in keys(), what="the fault on the board alice reads")
    before = {**th.snapshot(), "acks": th.rows("SELECT key FROM healthack")}
    answer = alice.call(th.sock, "health_ack", {"key": KEY, "note": "not mine to fix"})
    assert refusal(answer) == ("denied", f"health-ack {KEY}: only an admin may acknowledge")
    assert {**th.snapshot(), "acks": th.rows("SELECT key FROM healthack")} == before
    assert alice.ok(th.sock, "health")["problems"][0]["acknowledged"] is None
    done = carol.ok(th.sock, "health_ack", {"key": KEY, "note": "fan swap on Friday"})
    assert done["acknowledged"]["by"] == "gtu_carol"
    assert th.rows("SELECT by_user, note FROM healthack") == [("gtu_carol", "fan swap on Friday")]
    assert th.rows("SELECT user, action, target, reason FROM audit") == [
        ("gtu_carol", "health-ack", "gpu01:2 throttle-hw_thermal", "fan swap on Friday")
    ]
    shown = alice.ok(th.sock, "health")["problems"][0]["acknowledged"]
    assert shown["by"] == "gtu_carol" and shown["note"] == "fan swap on Friday"
