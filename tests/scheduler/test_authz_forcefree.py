"""Force-free is for admins only: real Unix users on a real head socket (the accounts
and the head of ``test_authz``; needs root, skips otherwise)."""

from __future__ import annotations

from headthread import LineClient, ThreadedHead, poll, refusal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_authz import People, Work, people, th, work  # noqa: F401  (the fixtures)

GPUS = "SELECT uuid, drained_by, drain_reason, drained_at, fence_code FROM gpu ORDER BY uuid"


def test_a_non_admin_is_refused_and_nothing_changes(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
    work: Work,  # noqa: F811
) -> None:
    before = {**th.snapshot(), "gpus": th.rows(GPUS)}
    target = next(
        f"{g['host']}:{g['index']}"
        for g in people.carol.ok(th.sock, "cluster")["gpus"]
        if g["uuid"] == work.gpu_ref
    )
    host, index = target.split(":")
    answers = people.bob.calls(
        th.sock,
        ("force_free", {"host": host, "gpu": index, "reason": "I want it"}),
        ("force_free", {"host": host, "gpu": work.gpu_ref, "reason": "I want it", "reset": True}),
    )
    assert [refusal(a) for a in answers] == [
        ("denied", f"force-free {target}: only an admin may force-free a GPU"),
        ("denied", f"force-free {host}:{work.gpu_ref}: only an admin may force-free a GPU"),
    ]
    # Alice owns the claim on that card, and is no admin either.
    (mine,) = people.alice.calls(
        th.sock, ("force_free", {"host": host, "gpu": index, "reason": "mine"})
    )
    assert refusal(mine)[0] == "denied"
    assert {**th.snapshot(), "gpus": th.rows(GPUS)} == before


def test_an_admin_must_say_why_and_name_a_gpu_that_exists(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    before = {**th.snapshot(), "gpus": th.rows(GPUS)}
    answers = people.carol.calls(
        th.sock,
        ("force_free", {"host": "gpu01", "gpu": "0", "reason": "   "}),
        ("force_free", {"host": "gpu01", "gpu": "0"}),
        ("force_free", {"host": "gpu01", "gpu": "9", "reason": "x"}),
        ("force_free", {"host": "nope", "gpu": "0", "reason": "x"}),
        ("force_free", {"host": "gpu01", "gpu": "0;reboot", "reason": "x"}),
    )
    codes = [refusal(a) for a in answers]
    assert codes[0] == (
        "bad-args",
        "force_free: reason: give a reason (why, for the audit and the owners)",
    )
    assert codes[1][0] == "bad-args" and codes[1][1].startswith("force_free: reason:")
    assert codes[2] == ("unknown-gpu", "force-free: no GPU 'gpu01:9' (GPUs of gpu01: 0, 1, 2, 3)")
    assert codes[3][0] == "unknown-host"
    assert codes[4][0] == "bad-args"
    assert {**th.snapshot(), "gpus": th.rows(GPUS)} == before


_text = st.text(max_size=40)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.dictionaries(
        st.sampled_from(["host", "gpu", "reason", "reset", "extra"]),
        st.one_of(_text, st.integers(), st.booleans(), st.none(), st.lists(_text, max_size=2)),
    )
)
def test_hostile_force_free_arguments_get_one_clean_line(
    th: ThreadedHead,  # noqa: F811
    args: dict[str, object],
) -> None:
    """From root (an admin): whatever the arguments, a clean refusal or a real run of a
    card that exists; never a traceback, and the head keeps answering. (The scripted
    hosts send no new sample: a run's waits are cut short, it ends not free.)"""
    assert th.head is not None
    th.head.force_frees.memory_wait_s = 0.1
    th.head.force_frees.grace_s = lambda: 0.1
    with LineClient(th.sock, timeout=60) as client:
        answer = client.ask("force_free", args, rid=f"h{id(args)}")
        if not answer.get("ok"):
            refusal(answer)
        else:
            assert answer["result"]["target"].startswith("gpu01:")
        poll(lambda: client.ok("ping"), what="the head to answer")
