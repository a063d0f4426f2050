"""The user whose work a force-free took sees its audit rows (``gputui audit``, which
shows a non-admin only the rows that name them), and nobody else does: real Unix
users on a real head socket (the accounts and the head of ``test_authz``)."""

from __future__ import annotations

from headthread import ThreadedHead, poll
from test_authz import People, Work, people, th, work  # noqa: F401  (the fixtures)


def test_the_owner_of_what_a_force_free_took_sees_its_audit_rows(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
    work: Work,  # noqa: F811
) -> None:
    target = next(
        f"{g['host']}:{g['index']}"
        for g in people.carol.ok(th.sock, "cluster")["gpus"]
        if g["uuid"] == work.gpu_ref
    )
    host, index = target.split(":")
    # The scripted hosts send no new sample: the waits for the job to stop and for
    # the memory to come back are cut short (the run ends not free). The answer may
    # still take longer than the client waits: the steps are audited as they happen.
    assert th.head is not None
    th.head.force_frees.memory_wait_s = 0.5
    th.head.force_frees.grace_s = lambda: 0.5
    people.carol.call(
        th.sock, "force_free", {"host": host, "gpu": index, "reason": "stuck, ticket 7"}
    )

    def force_frees(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return [r for r in rows if r["action"] == "force-free" and r["target"] == target]

    rows = poll(lambda: force_frees(people.alice.ok(th.sock, "audit")["rows"]), what="rows")
    assert {r["owner"] for r in rows} == {people.alice.name}
    assert str(rows[0]["outcome"]).startswith("stop: ")
    assert any(f"released claim {work.claim}" in str(r["outcome"]) for r in rows)
    # Bob had nothing there: he sees none of it; the admin sees every step.
    assert force_frees(people.bob.ok(th.sock, "audit")["rows"]) == []
    steps = [str(r["outcome"]).split(":")[0] for r in force_frees(
        people.carol.ok(th.sock, "audit")["rows"]
    )]  # fmt: skip
    assert steps[:2] == ["drain", "stop"]
