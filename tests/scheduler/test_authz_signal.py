"""Signals through the head, with real Unix users on a real head socket (the
accounts and the head of ``test_authz``; needs root, skips otherwise).

The head acts on its hosts as root, so the kernel would let it signal anyone's
process: its own check of the sample's owner is the only guard. A user signals
only their own processes; an admin anyone's, and that is audited."""

from __future__ import annotations

from typing import Any

from headthread import ThreadedHead, poll, refusal
from test_authz import People, people, th  # noqa: F401  (the fixtures)

from gputui.wire.messages import ProcessSample

AUDIT = "SELECT action, user, owner, target, outcome FROM audit WHERE action = 'signal'"


def _alices_process(th: ThreadedHead, people: People) -> dict[str, Any]:  # noqa: F811
    alice = people.alice
    proc = ProcessSample(
        pid=4242, uid=alice.uid, user=alice.name, command="python train.py", start_ticks=77
    )
    assert th.hosts is not None and th.head is not None
    th.in_loop(lambda: th.hosts.put_processes("gpu01", 0, (proc,)))  # type: ignore[union-attr]
    watch = th.head.watch

    def seen() -> bool:
        sample = watch.samples().get("gpu01", (0, None))[1]
        return sample is not None and bool(sample.gpus[0].processes)

    poll(seen, what="the head to see alice's process")
    uuid = th.hosts.uuid("gpu01", 0)
    return {"host": "gpu01", "gpu_uuid": uuid, "pid": 4242, "start_ticks": 77, "signal": "TERM"}


def test_a_user_cannot_signal_another_users_process(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    args = _alices_process(th, people)
    (answer,) = people.bob.calls(th.sock, ("signal", args))
    code, message = refusal(answer)
    assert code == "denied"
    assert message == (
        f"signal gpu01 pid 4242: it is {people.alice.name}'s process; you may signal only"
        " your own (admins: anyone's)"
    )
    assert th.hosts is not None
    assert th.hosts.process_signals == []
    assert th.rows(AUDIT) == []


def test_the_owner_can_and_is_not_audited(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    args = _alices_process(th, people)
    (answer,) = people.alice.calls(th.sock, ("signal", args))
    assert answer["ok"] is True, answer
    assert answer["result"]["audited"] is None
    assert th.hosts is not None
    ((host, process, signal),) = th.hosts.process_signals
    assert (host, process.pid, process.uid, process.start_ticks, signal) == (
        "gpu01", 4242, people.alice.uid, 77, "TERM",
    )  # fmt: skip
    assert th.rows(AUDIT) == []


def test_an_admin_can_and_is_audited(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    args = _alices_process(th, people)
    (answer,) = people.carol.calls(th.sock, ("signal", {**args, "signal": "KILL"}))
    assert answer["ok"] is True, answer
    assert th.hosts is not None
    assert [(p.pid, s) for _, p, s in th.hosts.process_signals] == [(4242, "KILL")]
    assert th.rows(AUDIT) == [
        ("signal", people.carol.name, people.alice.name, "gpu01:0 pid 4242", "SIGKILL delivered")
    ]


def test_a_process_not_in_the_last_sample_is_refused(
    th: ThreadedHead,  # noqa: F811
    people: People,  # noqa: F811
) -> None:
    args = _alices_process(th, people)
    answers = people.carol.calls(
        th.sock,
        ("signal", {**args, "pid": 4243}),
        ("signal", {**args, "start_ticks": 78}),  # the pid reused since the sample
        ("signal", {**args, "host": "nope"}),
        ("signal", {**args, "signal": "SEGV"}),
    )
    assert [refusal(a)[0] for a in answers] == ["gone", "gone", "unknown-host", "bad-args"]
    assert th.hosts is not None
    assert th.hosts.process_signals == []
