"""Who sees whose ``history``: real Unix users on a real head socket (identity from
SO_PEERCRED), each call made in a child forked and dropped to that user.

By default a user's own jobs. Another's, or everyone's, as ``queue --all`` shows them:
to anyone while ``scheduler.private_data`` is off; to admins alone while it is on.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll
from privileged import account
from realusers import User, as_user, made_users

from gputui.cli import history, verbs  # noqa: F401  (loaded before the fork)
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.client import HeadClient, HeadError
from gputui.scheduler.head.actions import Rules, run_key

pytestmark = pytest.mark.root


@dataclass(frozen=True)
class People:
    alice: User
    bob: User
    carol: User
    """An admin (in the head's admin group)."""
    group: str


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    group = f"gtha{secrets.token_hex(3)}"
    with made_users(3, "gth") as (alice, bob, carol):
        account("groupadd", group)
        try:
            account("usermod", "-a", "-G", group, carol.name)
            yield People(alice, bob, carol, group)
        finally:
            account("groupdel", group, check=False)


@contextlib.contextmanager
def head(private: bool, group: str) -> Iterator[ThreadedHead]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-history-", dir="/tmp"))
    tmp.chmod(0o755)
    rules = Rules(sched=SchedulerConfig(private_data=private))
    try:
        with ThreadedHead(tmp, {"gpu01": 2}, admin_group=group, rules=rules) as th:
            yield th
            assert th.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _call(sock: str, op: str, args: dict[str, Any]) -> Any:
    """The answer, or ``(code, message)`` of a refusal."""
    with HeadClient(sock, timeout=20) as client:
        try:
            return client.call(op, args)
        except HeadError as exc:
            return (exc.code, exc.message)


def _alice_ran_a_job(th: ThreadedHead, alice: User) -> int:
    job = as_user(alice, _call, str(th.sock), "submit", {"argv": ["train"], "cwd": "/"}).value
    job_id = int(job["job"]["id"])
    hosts = th.hosts
    assert hosts is not None
    with LineClient(th.sock) as root:

        def state() -> str:
            return str(root.ok("show", {"job_id": job_id})["job"]["state"])

        poll(lambda: state() in ("starting", "running"), what="alice's job to start")
        th.in_loop(
            lambda: hosts.finish("gpu01", run_key(job_id, 1), exit_code=0, ended_at=time.time())
        )
        poll(lambda: state() == "completed", what="alice's job to end")
    return job_id


def _ids(answer: Any) -> list[int]:
    assert isinstance(answer, dict), answer
    return [int(j["id"]) for j in answer["jobs"]]


@pytest.mark.parametrize("private", [False, True])
def test_who_sees_whose_history(people: People, private: bool) -> None:
    with head(private, people.group) as th:
        job_id = _alice_ran_a_job(th, people.alice)
        sock = str(th.sock)

        def ask(who: User, **args: Any) -> Any:
            return as_user(who, _call, sock, "history", args).value

        assert _ids(ask(people.alice)) == [job_id]  # her own, by default
        assert _ids(ask(people.bob)) == []  # his own: none
        assert _ids(ask(people.carol, user=people.alice.name)) == [job_id]  # an admin
        assert _ids(ask(people.carol, all_users=True)) == [job_id]
        theirs = ask(people.bob, user=people.alice.name)
        everyone = ask(people.bob, all_users=True)
        if private:
            assert theirs[0] == "denied" and "private" in theirs[1], theirs
            assert everyone[0] == "denied", everyone
            assert _ids(ask(people.alice, user=people.alice.name)) == [job_id]
        else:
            assert _ids(theirs) == [job_id]
            assert _ids(everyone) == [job_id]
