"""Re-running someone's command, and taking back a ``gputui run`` claim, with real
Unix users on a real head socket (the accounts and fixtures of ``test_authz``).

A requeue of a job that ended runs its owner's command again, as its owner: it
needs ``--force``, from the owner as from an admin, and both the refusal and the
answer say whose command it is. A ``gputui run`` claim is taken back onto a new
connection (``resume``) by its owner only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from headthread import LineClient, ThreadedHead, poll, refusal
from realusers import as_user
from test_authz import ALICE, CAROL, People, User, people, th

from gputui.cli import jobs, verbs  # noqa: F401  (loaded before the fork)
from gputui.common import locations
from gputui.entry import main

__all__ = ["people", "th"]  # the fixtures, used by name


def _finished_job(th: ThreadedHead, alice: User) -> int:
    """A job of alice's that ran and completed."""
    job_id = int(
        alice.ok(th.sock, "submit", {"argv": ["train", "--secret"], "gpus": 1})["job"]["id"]
    )
    with LineClient(th.sock) as root:
        poll(lambda: root.ok("show", {"job_id": job_id})["job"]["state"] == "running")
        assert th.hosts is not None
        key = th.hosts.launches[-1].key
        th.in_loop(lambda: th.hosts.finish("gpu01", key, 0) if th.hosts else None)
        poll(lambda: root.ok("show", {"job_id": job_id})["job"]["state"] == "completed")
    return job_id


def _cli(user: User, sock: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``gputui ARGV`` as ``user``: the real CLI, in a fork of this process dropped to
    the user's uid and groups (nothing is read from the checkout, which may be closed
    to others)."""

    def verb() -> int:
        locations._warned.clear()
        return main(list(argv))

    env = {"PATH": "/usr/bin:/bin", "HOME": str(user.home), "GPUTUI_HEAD_SOCKET": str(sock)}
    ran = as_user(user, verb, env=env)
    return subprocess.CompletedProcess(list(argv), int(ran.value), ran.out, ran.err)


def test_requeue_of_an_ended_job_needs_force_and_says_whose_command_runs(
    th: ThreadedHead, people: People
) -> None:
    alice, carol, sock = people.alice, people.carol, th.sock
    job_id = _finished_job(th, alice)
    launches = len(th.hosts.launches) if th.hosts else 0
    before = th.snapshot()
    # An admin (not root), without --force: refused, and told whose command it is.
    done = _cli(carol, sock, "requeue", str(job_id), "--reason", "rerun for the paper")
    assert done.returncode != 0 and done.stdout == "", done
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"runs {ALICE}'s command again, as {ALICE}" in done.stderr
    assert "--force" in done.stderr
    # The owner too: re-running a command that ended is never a side effect.
    code, message = refusal(alice.call(sock, "requeue", {"job_id": job_id}))
    assert code == "force-required" and f"{ALICE}'s command" in message
    assert th.snapshot() == before, "a refused requeue changed something"
    # With --force: done, said so, audited, and alice is told.
    done = _cli(carol, sock, "requeue", str(job_id), "--force", "--reason", "rerun for the paper")
    assert done.returncode == 0, done
    assert done.stdout == (
        f"job {job_id}: queued: queued again: it runs {ALICE}'s command again, as {ALICE}\n"
    )
    rows = th.rows("SELECT action, target, user, owner FROM audit ORDER BY id")
    assert rows == [("requeue", f"job {job_id}", CAROL, ALICE)]
    notices = th.rows("SELECT uid, text FROM notice WHERE kind = 'admin'")
    assert notices == [
        (alice.uid, f"job {job_id}: requeue by {CAROL} (admin): rerun for the paper")
    ]
    with LineClient(sock) as root:
        poll(lambda: root.ok("show", {"job_id": job_id})["job"]["state"] == "running")
    assert th.hosts is not None and len(th.hosts.launches) == launches + 1
    assert th.hosts.launches[-1].user == ALICE


def test_only_its_owner_takes_a_run_claim_onto_a_new_connection(
    th: ThreadedHead, people: People
) -> None:
    alice, bob, carol, sock = people.alice, people.bob, people.carol, th.sock
    claim = alice.ok(sock, "claim", {"gpus": 1, "note": "mine"})["claim"]
    assert th.rows("SELECT session FROM claim WHERE id = ?", claim["id"]) == [(None,)]
    before = th.snapshot()
    for user in (bob, carol):
        answer = user.call(sock, "claim", {"session": True, "resume": claim["id"]})
        code, message = refusal(answer)
        assert code == "unknown-claim" and message == f"no claim {claim['id']} of yours"
    # Alice herself: a claim that is no run's is not taken.
    code, message = refusal(alice.call(sock, "claim", {"session": True, "resume": claim["id"]}))
    assert code == "bad-state" and "not a gputui run session's" in message
    assert th.snapshot() == before
