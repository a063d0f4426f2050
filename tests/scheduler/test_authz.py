"""Who may do what to whose work, with real Unix users on a real head socket.

The head knows a caller only from ``SO_PEERCRED``; each user here is a real
account and each call a real process running as that account (the blocking
``HeadClient``, in a child process that became that user). Users act on their own jobs and
claims only; an admin (a member of the configured Unix group) may act on
anyone's, with a reason, and every such act leaves an ``Audit`` row. A second
part reaches the same socket through a real OpenSSH sshd (direct-streamlocal),
where the peer is sshd's child running as the SSH user.

Needs root (to create the accounts and switch to them); skips and says why
otherwise, and as root fails rather than skip. Each call as a user is a fork of
this process that drops to the user's uid and groups (``asuser``), so the tests
run from a checkout other users cannot read.
"""

from __future__ import annotations

import contextlib
import grp
import importlib.util
import json
import os
import pwd
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import realusers
from asuser import run_as
from headthread import LineClient, ThreadedHead, poll, refusal
from privileged import account, accounts_lock, need_root

from gputui.scheduler.client import HeadClient, HeadError

REPO = Path(__file__).resolve().parents[2]
ADMINS = "gtu_admins"
ALICE, BOB, CAROL = "gtu_alice", "gtu_bob", "gtu_carol"


def _client_calls(path: str, calls: tuple[tuple[str, Any], ...]) -> list[dict[str, Any]]:
    """``calls`` on one connection, the way a CLI process makes them (run as the user)."""
    out: list[dict[str, Any]] = []
    with HeadClient(path, timeout=20) as client:
        for op, args in calls:
            if op == "raw":  # a line no real client sends
                with socket.socket(socket.AF_UNIX) as raw:
                    raw.settimeout(20)
                    raw.connect(path)
                    raw.sendall(args.encode() + b"\n")
                    out.append(json.loads(raw.makefile("rb").readline()))
                continue
            try:
                out.append({"ok": True, "result": client.call(op, args)})
            except HeadError as exc:
                out.append({"ok": False, "error": {"code": exc.code, "message": exc.message}})
    return out


def _run(cmd: list[str]) -> None:
    account(*cmd)


@dataclass(frozen=True)
class User(realusers.User):
    """A test account (``realusers.User``) that calls the head as itself."""

    def calls(self, sock: Path, *calls: tuple[str, Any]) -> list[dict[str, Any]]:
        """Run ``calls`` ((op, args) pairs) as this user, one process, one connection."""
        answers: list[dict[str, Any]] = self.run(lambda: _client_calls(str(sock), calls))
        return answers

    def run(self, fn: Callable[[], Any], timeout: float = 60.0) -> Any:
        """``fn()`` in a process running as this user (a fork: nothing is read from
        the checkout); its JSON value."""
        return run_as(self.uid, self.gid, self.groups, fn, timeout=timeout)

    def call(self, sock: Path, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.calls(sock, (op, args or {}))[0]

    def ok(self, sock: Path, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.call(sock, op, args)
        assert answer["ok"] is True, answer
        result: dict[str, Any] = answer["result"]
        return result


def _ensure_user(name: str, *, groups: tuple[str, ...] = ()) -> User:
    with accounts_lock():  # another test process may be making the same user
        return _ensure_user_locked(name, groups)


def _ensure_user_locked(name: str, groups: tuple[str, ...]) -> User:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _run(["useradd", "-m", "-s", "/bin/sh", name])
        # A locked password ("!") makes sshd refuse the account without PAM; "*" does not.
        _run(["usermod", "-p", "*", name])
        entry = pwd.getpwnam(name)
    for group in groups:
        if name not in grp.getgrnam(group).gr_mem:
            _run(["usermod", "-a", "-G", group, name])
    return User(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


@dataclass(frozen=True)
class People:
    alice: User
    bob: User
    carol: User
    """An admin: a member of ``ADMINS``."""


@pytest.fixture(scope="module")
def people() -> People:
    """The accounts. Without root this skips; as root nothing may keep these tests
    from running (a skip there would leave the security boundary untested while the
    suite reports green), so a missing tool fails them."""
    need_root("creates Unix users and calls the head as each of them")
    if shutil.which("useradd") is None:
        pytest.fail(
            "running as root, but useradd is not installed: the tests of who may do what cannot run"
        )
    with accounts_lock():
        try:
            grp.getgrnam(ADMINS)
        except KeyError:
            _run(["groupadd", ADMINS])
    return People(_ensure_user(ALICE), _ensure_user(BOB), _ensure_user(CAROL, groups=(ADMINS,)))


@pytest.fixture
def th(people: People) -> Iterator[ThreadedHead]:
    """A head whose socket the test users can reach (a 0755 directory under /tmp)."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-authz-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        with ThreadedHead(tmp, {"gpu01": 4}, admin_group=ADMINS) as head:
            yield head
            assert head.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Work:
    """Alice's jobs and claim, in the states each action needs."""

    claim: int
    gpu_ref: str
    running: tuple[int, int]
    queued: tuple[int, int]


@pytest.fixture
def work(th: ThreadedHead, people: People) -> Work:
    sock, alice = th.sock, people.alice
    answers = alice.calls(
        sock,
        ("claim", {"gpus": 1, "note": "debugging"}),
        ("submit", {"argv": ["train", "a"], "gpus": 1}),
        ("submit", {"argv": ["train", "b"], "gpus": 1}),
        ("submit", {"argv": ["big", "a"], "gpus": 4}),
        ("submit", {"argv": ["big", "b"], "gpus": 4}),
    )
    assert all(a["ok"] for a in answers), answers
    claim = answers[0]["result"]["claim"]
    assert claim["state"] == "active" and claim["user"] == ALICE
    jobs = [a["result"]["job"]["id"] for a in answers[1:]]
    with LineClient(sock) as root:
        poll(
            lambda: (
                {j["id"]: j["state"] for j in root.ok("queue")["jobs"]}
                == {jobs[0]: "running", jobs[1]: "running", jobs[2]: "queued", jobs[3]: "queued"}
            ),
            what="two of alice's jobs running, two queued",
        )
    gpu = claim["gpu_uuids"][0]
    return Work(claim["id"], gpu, (jobs[0], jobs[1]), (jobs[2], jobs[3]))


def _attempts(work: Work, reason: str | None) -> list[tuple[str, dict[str, Any]]]:
    """One of each action on alice's work, each on an item in a state it applies to."""
    extra = {} if reason is None else {"reason": reason}
    running, queued = work.running, work.queued
    return [
        ("cancel", {"job_id": queued[0], **extra}),
        ("hold", {"job_id": queued[1], **extra}),
        ("release_hold", {"job_id": queued[1], **extra}),
        ("kill", {"job_id": running[0], **extra}),
        ("preempt", {"job_id": running[1], **extra}),
        ("requeue", {"job_id": running[1], **extra}),
        ("release", {"claim_ids": [work.claim], **extra}),
        ("release", {"gpu_refs": [work.gpu_ref], **extra}),
    ]


# -- identity ----------------------------------------------------------------------------


def test_the_head_names_each_caller_by_their_unix_account(th: ThreadedHead, people: People) -> None:
    for user, admin in ((people.alice, False), (people.bob, False), (people.carol, True)):
        me = user.ok(th.sock, "whoami")
        assert (me["user"], me["uid"], me["admin"]) == (user.name, user.uid, admin)
    assert ADMINS in people.carol.ok(th.sock, "whoami")["groups"]


def test_a_request_cannot_name_its_user(th: ThreadedHead, people: People, work: Work) -> None:
    before = th.snapshot()
    cancel = {"id": 1, "op": "cancel", "rid": "r1", "args": {"job_id": work.queued[0]}}
    answers = people.bob.calls(
        th.sock,
        ("raw", json.dumps({**cancel, "user": ALICE})),
        ("raw", json.dumps({**cancel, "uid": people.alice.uid})),
        ("raw", json.dumps({**cancel, "args": {"job_id": work.queued[0], "user": ALICE}})),
        ("raw", json.dumps({"id": 2, "op": "whoami", "args": {"user": CAROL}})),
        ("whoami", {}),
    )
    codes = [refusal(a)[0] if not a["ok"] else None for a in answers[:4]]
    assert codes == ["malformed", "malformed", "bad-args", "bad-args"]
    assert [refusal(a)[1] for a in answers[:4]] == [
        "unknown request field 'user'",
        "unknown request field 'uid'",
        "cancel: user: unknown field",
        "whoami: user: unknown field",
    ]
    assert answers[4]["result"]["user"] == BOB
    assert th.snapshot() == before


# -- users ---------------------------------------------------------------------------------


def test_a_user_cannot_touch_another_users_jobs_or_claims(
    th: ThreadedHead, people: People, work: Work
) -> None:
    before = th.snapshot()
    tries = [*_attempts(work, None), *_attempts(work, "I need the GPUs")]
    answers = people.bob.calls(th.sock, *tries, ("logs", {"job_id": work.running[0]}))
    for (op, args), answer in zip([*tries, ("logs", {})], answers, strict=True):
        code, message = refusal(answer)
        assert code == "denied", (op, args, answer)
        assert "belongs to gtu_alice" in message, message
        if op != "logs":
            assert message.endswith(f"only they or an admin may {op.replace('_', '-')} it")
    # --all means "all of mine": nothing of alice's goes with it.
    assert people.bob.ok(th.sock, "release", {"all": True}) == {"released": []}
    assert th.snapshot() == before
    assert th.rows("SELECT count(*) FROM audit") == [(0,)]


def test_an_admin_must_give_a_reason(th: ThreadedHead, people: People, work: Work) -> None:
    before = th.snapshot()
    tries = [*_attempts(work, None), *_attempts(work, "   ")]
    for (op, args), answer in zip(tries, people.carol.calls(th.sock, *tries), strict=True):
        code, message = refusal(answer)
        assert code == "reason-required", (op, args, answer)
        assert "an admin must give --reason" in message
    assert th.snapshot() == before


def test_an_admin_acts_on_anyones_work_with_a_reason_and_it_is_audited(
    th: ThreadedHead, people: People, work: Work
) -> None:
    carol, sock = people.carol, th.sock
    running, queued = work.running, work.queued
    reason = "incident 42: card needed"
    steps = [
        ("cancel", {"job_id": queued[0]}, "cancelled"),
        ("hold", {"job_id": queued[1]}, "held"),
        ("release_hold", {"job_id": queued[1]}, "queued"),
        ("kill", {"job_id": running[0]}, "killing"),
        ("preempt", {"job_id": running[1]}, "preempting"),
    ]
    for op, args, state in steps:
        assert carol.ok(sock, op, {**args, "reason": reason})["job"]["state"] == state
    with LineClient(sock) as root:
        poll(
            lambda: root.ok("show", {"job_id": running[0]})["job"]["state"] == "killed",
            what="the killed job to end",
        )
    requeue = {"job_id": running[0], "reason": reason, "force": True}  # it ended: --force
    requeued = carol.ok(sock, "requeue", requeue)["job"]
    assert (requeued["state"], requeued["requeues"]) == ("queued", 1)
    released = carol.ok(sock, "release", {"claim_ids": [work.claim], "reason": reason})
    assert [c["id"] for c in released["released"]] == [work.claim]

    wanted = [
        ("cancel", f"job {queued[0]}"),
        ("hold", f"job {queued[1]}"),
        ("release-hold", f"job {queued[1]}"),
        ("kill", f"job {running[0]}"),
        ("preempt", f"job {running[1]}"),
        ("requeue", f"job {running[0]}"),
        ("release", f"claim {work.claim}"),
    ]
    rows = carol.ok(sock, "audit")["rows"]
    assert [(r["action"], r["target"]) for r in rows] == wanted
    assert {(r["user"], r["uid"], r["owner"], r["reason"]) for r in rows} == {
        (CAROL, carol.uid, ALICE, reason)
    }
    stored = th.rows("SELECT action, target, user, owner, reason FROM audit ORDER BY id")
    assert stored == [(a, t, CAROL, ALICE, reason) for a, t in wanted]
    # The owner sees what was done to her work; another user sees none of it.
    assert len(people.alice.ok(sock, "audit")["rows"]) == len(wanted)
    assert people.bob.ok(sock, "audit")["rows"] == []
    # And alice is told of each, with the reason.
    notices = th.rows("SELECT uid, text FROM notice WHERE kind = 'admin' ORDER BY id")
    assert notices == [
        (people.alice.uid, f"{target}: {action} by {CAROL} (admin): {reason}")
        for action, target in wanted
    ]


def test_an_owners_own_cancel_kill_and_preempt_are_audited_hold_and_release_not(
    th: ThreadedHead, people: People, work: Work
) -> None:
    """What stops or reruns work is audited whoever does it: the ACTOR is the owner,
    the row's owner too; holding a job and releasing one's claim are not."""
    alice, sock = people.alice, th.sock
    assert alice.ok(sock, "hold", {"job_id": work.queued[0]})["job"]["state"] == "held"
    assert alice.ok(sock, "cancel", {"job_id": work.queued[0]})["job"]["state"] == "cancelled"
    assert alice.ok(sock, "kill", {"job_id": work.running[0]})["job"]["state"] == "killing"
    preempted = alice.ok(sock, "preempt", {"job_id": work.running[1]})["job"]
    assert preempted["state"] == "preempting"
    assert alice.ok(sock, "release", {"all": True})["released"][0]["id"] == work.claim
    rows = th.rows("SELECT user, action, target, owner, reason, outcome FROM audit ORDER BY id")
    assert rows == [
        (ALICE, "cancel", f"job {work.queued[0]}", ALICE, "", "cancelled before it ran"),
        (ALICE, "kill", f"job {work.running[0]}", ALICE, "", rows[1][5]),
        (ALICE, "preempt", f"job {work.running[1]}", ALICE, "", rows[2][5]),
    ]
    assert "killed" in rows[1][5] and "requeued" in rows[2][5], rows
    # She sees her own rows; in the table the OWNER of one's own act is "-".
    seen = alice.ok(sock, "audit")["rows"]
    assert [r["action"] for r in seen] == ["cancel", "kill", "preempt"]


# -- through OpenSSH -------------------------------------------------------------------------


def _sshd_process_class() -> Any:
    """``SshdProcess`` of the integration tests (a real sshd on a loopback port)."""
    path = REPO / "tests" / "integration" / "conftest.py"
    spec = importlib.util.spec_from_file_location("gputui_test_sshd", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "SshdProcess"):
        spec.loader.exec_module(module)
    return module.SshdProcess


def _authorize_key(user: User, tmp_path: Path) -> tuple[Path, Callable[[], None]]:
    """A fresh key in ``user``'s ~/.ssh/authorized_keys; and how to take it out."""
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp_path / f"{user.name}_key"
    key.write_private_key(str(key_path))
    key_path.chmod(0o600)
    ssh_dir = user.home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    os.chown(ssh_dir, user.uid, user.gid)
    authorized = ssh_dir / "authorized_keys"
    line = key.export_public_key().decode().strip() + " gputui-authz-test\n"
    old = authorized.read_text() if authorized.exists() else ""
    authorized.write_text(old + line)
    os.chown(authorized, user.uid, user.gid)
    authorized.chmod(0o600)

    def remove() -> None:
        authorized.write_text(authorized.read_text().replace(line, ""))

    return key_path, remove


@pytest.fixture
def ssh_keys(people: People, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A fresh key for each of alice, bob and carol (taken out again afterwards)."""
    made = [_authorize_key(u, tmp_path) for u in (people.alice, people.bob, people.carol)]
    try:
        yield {name: key for name, (key, _) in zip((ALICE, BOB, CAROL), made, strict=True)}
    finally:
        for _, remove in made:
            remove()


@pytest.mark.sshd
async def test_through_sshd_direct_streamlocal_the_head_names_the_ssh_user(
    th: ThreadedHead,
    people: People,
    work: Work,
    ssh_keys: dict[str, Path],
    tmp_path: Path,
    free_port: Callable[[], int],
) -> None:
    """Through a real OpenSSH sshd: the head knows each caller as the SSH login user,
    so bob can change nothing of alice's, and carol (an admin) can, with a reason,
    audited; nothing in a request can say otherwise."""
    import asyncssh

    from gputui.scheduler.client.aio import AsyncHeadClient

    if not os.path.exists("/usr/sbin/sshd"):  # people: only ever reached as root
        pytest.fail("running as root, but /usr/sbin/sshd is missing: install OpenSSH's server")
    sshd_dir = tmp_path / "sshd"
    sshd_dir.mkdir()
    sshd = _sshd_process_class()(
        sshd_dir,
        free_port(),
        f"{ALICE} {BOB} {CAROL}",
        Path(".ssh/authorized_keys"),  # relative: in the user's home
        ("AllowStreamLocalForwarding yes", "DisableForwarding no"),
    )
    sshd.start()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())

    @contextlib.asynccontextmanager
    async def as_user(name: str) -> AsyncIterator[AsyncHeadClient]:
        async with asyncssh.connect(
            "127.0.0.1",
            port=sshd.port,
            username=name,
            client_keys=[str(ssh_keys[name])],
            known_hosts=str(known_hosts),
            agent_path=None,
            config=None,
        ) as conn:
            reader, writer = await conn.open_unix_connection(str(th.sock))
            client = AsyncHeadClient(reader, writer)
            client.start()
            try:
                yield client
            finally:
                await client.close()

    try:
        async with as_user(ALICE) as alice:
            me = await alice.call("whoami")
            assert (me["user"], me["uid"], me["admin"]) == (ALICE, people.alice.uid, False)
            # A time limit lets it backfill beside alice's queued 4-GPU jobs (EASY).
            submit = {"argv": ["via", "ssh"], "time_limit_s": 600}
            job = (await alice.call("submit", submit))["job"]
        with LineClient(th.sock) as root:
            poll(
                lambda: root.ok("show", {"job_id": job["id"]})["job"]["state"] == "running",
                what="alice's job to run",
            )
        before = th.snapshot()
        async with as_user(BOB) as bob:
            assert (await bob.call("whoami"))["user"] == BOB
            for op, args in [*_attempts(work, None), *_attempts(work, "I need the GPUs")]:
                with pytest.raises(HeadError) as refused:
                    await bob.call(op, args)
                assert refused.value.code == "denied", (op, args, refused.value.message)
        assert th.snapshot() == before
        assert th.rows("SELECT count(*) FROM audit") == [(0,)]
        async with as_user(CAROL) as carol:
            killed = await carol.call("kill", {"job_id": work.running[0], "reason": "ssh audit"})
            assert killed["job"]["state"] == "killing"
    finally:
        sshd.stop()
    assert th.rows("SELECT user, uid FROM job WHERE id = ?", job["id"]) == [
        (ALICE, people.alice.uid)
    ]
    assert th.rows("SELECT action, user, owner, reason FROM audit") == [
        ("kill", CAROL, ALICE, "ssh audit")
    ]
