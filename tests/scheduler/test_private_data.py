"""``scheduler.private_data``: a job's command line, working directory and log path,
and a claim's note, are the owner's and admins' alone, in every read that has them.

Real users on a real head socket (identity from SO_PEERCRED), each call made in a
child forked and dropped to that user: ``show``, ``claims``, ``explain``, ``queue``,
the state a subscription starts with and the state pushed on a change, and the
``gputui show`` the CLI prints. Off (the default), everyone sees them, as in Slurm.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll
from privileged import account
from realusers import User, as_user, made_users

from gputui.cli import jobs, verbs  # noqa: F401  (loaded before the fork)
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.client import HeadClient
from gputui.scheduler.head.actions import Rules

pytestmark = pytest.mark.root

SECRET_ARGV = ["train.py", "--token=hunter2"]
SECRET_NOTE = "python eval.py --key=hunter2"


@dataclass(frozen=True)
class People:
    alice: User
    bob: User
    carol: User
    """An admin (in the head's admin group)."""
    group: str


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    group = f"gtpa{secrets.token_hex(3)}"
    with made_users(3, "gtq") as (alice, bob, carol):
        account("groupadd", group)
        try:
            account("usermod", "-a", "-G", group, carol.name)
            yield People(alice, bob, carol, group)
        finally:
            account("groupdel", group, check=False)


@contextlib.contextmanager
def head(people: People, private: bool) -> Iterator[ThreadedHead]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-private-", dir="/tmp"))
    tmp.chmod(0o755)
    rules = Rules(sched=SchedulerConfig(private_data=private))
    try:
        with ThreadedHead(tmp, {"gpu01": 2}, admin_group=people.group, rules=rules) as th:
            yield th
            assert th.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _calls(sock: str, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    with HeadClient(sock, timeout=20) as client:
        return [client.call(op, args) for op, args in calls]


def _pushed(sock: str, claim_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The state a subscription starts with, and the first pushed one after it."""
    with HeadClient(sock, timeout=20) as client:
        first = client.call("subscribe")["state"]
        for push in client.pushes():
            if push.get("push") == "state":
                return first, push["state"]
    raise AssertionError("no push")


def _note_of(state: dict[str, Any], claim_id: int) -> tuple[str, str]:
    """(the claim's note, the name its GPU's holder shows) in a pushed state."""
    note = next(c["note"] for c in state["claims"] if c["id"] == claim_id)
    holder = next(
        g["holder"]["name"]
        for g in state["gpus"]
        if g["holder"] and g["holder"]["kind"] == "claim" and g["holder"]["id"] == claim_id
    )
    return note, holder


def _alices_work(th: ThreadedHead, people: People) -> tuple[int, int]:
    done = as_user(
        people.alice,
        _calls,
        str(th.sock),
        [
            ("claim", {"gpus": 1, "note": SECRET_NOTE}),
            ("submit", {"argv": SECRET_ARGV, "gpus": 2, "cwd": "/srv/alice/secret-project"}),
        ],
    ).value
    return done[0]["claim"]["id"], done[1]["job"]["id"]


def _reads(th: ThreadedHead, user: User, claim_id: int, job_id: int) -> dict[str, Any]:
    """Everything ``user`` can read about alice's job and claim, through the socket."""
    show, claims, explain, queue = as_user(
        user,
        _calls,
        str(th.sock),
        [
            ("show", {"job_id": job_id}),
            ("claims", {"all": True}),
            ("explain", {"job_id": job_id}),
            ("queue", {"all": True}),
        ],
    ).value
    result: list[Any] = []
    waiter = threading.Thread(
        target=lambda: result.append(as_user(user, _pushed, str(th.sock), claim_id).value)
    )
    waiter.start()
    with LineClient(th.sock) as root:
        spare = root.ok("submit", {"argv": ["spare"], "gpus": 2})["job"]["id"]
        toggle = iter(["hold", "release_hold"] * 1000)

        def pushed() -> bool:  # each change is pushed: change until the child saw one
            if waiter.is_alive():
                root.ok(next(toggle), {"job_id": spare})
            return not waiter.is_alive()

        poll(pushed, what=f"{user.name} to get a pushed state")
        root.ok("cancel", {"job_id": spare})
    waiter.join()
    first, later = result[0]
    return {
        "show": show["job"],
        "claim_note": next(c["note"] for c in claims["claims"] if c["id"] == claim_id),
        "explain": json.dumps(explain),
        "queue": json.dumps(queue),
        "subscribed": _note_of(first, claim_id),
        "pushed": _note_of(later, claim_id),
    }


def _sees_all(seen: dict[str, Any]) -> None:
    assert seen["show"]["argv"] == SECRET_ARGV
    assert seen["show"]["cwd"] == "/srv/alice/secret-project"
    assert "log_path" in seen["show"] and "private" not in seen["show"]
    assert seen["claim_note"] == SECRET_NOTE
    assert seen["subscribed"] == seen["pushed"] == (SECRET_NOTE, SECRET_NOTE)


def test_private_data_keeps_command_lines_to_the_owner_and_admins(people: People) -> None:
    with head(people, private=True) as th:
        claim_id, job_id = _alices_work(th, people)
        bob = _reads(th, people.bob, claim_id, job_id)
        assert bob["show"]["private"] is True
        assert {"argv", "cwd", "log_path"} & set(bob["show"]) == set()
        assert (bob["show"]["user"], bob["show"]["name"]) == (people.alice.name, "train.py")
        assert bob["claim_note"] == "(private)"
        assert bob["subscribed"] == bob["pushed"] == ("(private)", "(private)")
        for read in ("explain", "queue"):
            assert "hunter2" not in bob[read] and "secret-project" not in bob[read]
        _sees_all(_reads(th, people.alice, claim_id, job_id))
        _sees_all(_reads(th, people.carol, claim_id, job_id))
        # What the CLI prints for bob.
        ran = as_user(people.bob, verbs.main, ["--socket", str(th.sock), "show", str(job_id)])
        assert ran.value == 0, ran.err
        lines = {line.split(":", 1)[0].strip(): line for line in ran.out.splitlines()}
        for key in ("argv", "cwd", "log_path"):
            assert lines[key].endswith(": (private)"), ran.out
        assert "hunter2" not in ran.out


def test_without_private_data_everyone_sees_them_as_in_slurm(people: People) -> None:
    with head(people, private=False) as th:
        claim_id, job_id = _alices_work(th, people)
        _sees_all(_reads(th, people.bob, claim_id, job_id))
