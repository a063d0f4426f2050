"""Ownership flags in the head (``head.watch.flags``), over a real head with scripted hosts.

The daemon, its store and its socket are real; the hosts are ``headkit.ScriptedHosts``,
whose samples list whatever processes a test puts on a GPU, so each rule is driven
exactly: a second sample confirms a process, a claim makes it its owner's, a signal
the host refuses is written into its audit row. ``gputui queue`` runs as a real process.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll

from gputui.config.scheduler import Ownership, SchedulerConfig
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer
from gputui.wire.messages import ProcessSample

LAYOUT = {"gpu01": 4}
ME = os.getuid()
MY_NAME = pwd.getpwuid(ME).pw_name


def rules(mode: str = "warn", grace_s: float = 0.0, exempt: tuple[str, ...] = ()) -> Rules:
    ownership = Ownership.model_validate(
        {"mode": mode, "grace_s": grace_s, "exempt_users": list(exempt)}
    )
    return Rules(sched=SchedulerConfig(ownership=ownership))


def proc(
    pid: int, user: str = MY_NAME, uid: int = ME, name: str = "python train.py", **kw: Any
) -> ProcessSample:
    return ProcessSample(pid=pid, uid=uid, user=user, command=name, start_ticks=1000 + pid, **kw)


def put(th: ThreadedHead, index: int, *processes: ProcessSample) -> None:
    assert th.hosts is not None
    hosts = th.hosts
    th.in_loop(lambda: hosts.put_processes("gpu01", index, tuple(processes)))


def sample_again(th: ThreadedHead) -> None:
    assert th.hosts is not None
    hosts = th.hosts
    th.in_loop(lambda: hosts.sample_again("gpu01"))


def ticks(th: ThreadedHead) -> int:
    assert th.head is not None
    return th.head.batch.flags.ticks


def ticked(th: ThreadedHead, n: int = 3) -> None:
    """Wait until ``n`` more ownership ticks were committed."""
    goal = ticks(th) + n
    poll(lambda: ticks(th) >= goal, what=f"{n} ticks")


def flag(client: LineClient, pid: int) -> dict[str, Any] | None:
    return next((f for f in client.ok("cluster")["flags"] if f["pid"] == pid), None)


def test_a_process_is_flagged_until_its_owner_holds_its_gpu_and_is_told_once(
    tmp_path: Path,
) -> None:
    with ThreadedHead(tmp_path, LAYOUT, rules=rules("warn")) as th, LineClient(th.sock) as client:
        put(th, 1, proc(500))
        first = poll(lambda: flag(client, 500), what="the flag")
        assert first["kind"] == "no-allocation" and first["gpu_index"] == 1
        assert first["user"] == MY_NAME and first["name"] == "python train.py"
        assert first["signal_at"] is None and first["next_signal"] is None
        told = "SELECT text FROM notice WHERE uid = ? AND kind = 'ownership'"
        assert th.rows(told, ME) == [], "not before a second sample confirms it"
        sample_again(th)
        ((text,),) = poll(lambda: th.rows(told, ME), what="the notice")
        assert text.startswith("pid 500 on gpu01 GPU 1 (python train.py) runs with no job or claim")

        # Its owner claims another GPU of the host: now it is outside their GPUs.
        client.ok("claim", {"gpu_refs": ["gpu01:0"]})
        poll(lambda: (flag(client, 500) or {}).get("kind") == "outside-allocation", what="kind")
        # ... and then its own GPU: no longer flagged.
        client.ok("claim", {"gpu_refs": ["gpu01:1"]})
        poll(lambda: flag(client, 500) is None, what="the flag to go")
        ticked(th)
        assert flag(client, 500) is None
        assert len(th.rows(told, ME)) == 1, "told once"
        assert th.problems == []


def test_enforce_audits_a_refused_signal_and_sends_sigkill_once_after_a_further_grace(
    tmp_path: Path,
) -> None:
    # The head's clock is the test's: each grace passes only when the test moves it,
    # so no tick can send SIGKILL before the test has looked at SIGTERM.
    clock = SettableClock()
    with (
        ThreadedHead(tmp_path, LAYOUT, rules=rules("enforce", grace_s=60.0), clock=clock) as th,
        LineClient(th.sock) as client,
    ):
        assert th.hosts is not None
        refused = "permission denied: pid 600 belongs to gtu_bob"
        th.hosts.signal_answer = HostAnswer(False, code="permission-denied", message=refused)
        put(th, 2, proc(600, user="gtu_bob", uid=4321))
        poll(lambda: flag(client, 600), what="the flag")
        sample_again(th)
        notices = "SELECT text FROM notice WHERE uid = 4321 AND kind = 'ownership'"
        poll(lambda: th.rows(notices), what="the owner told")
        ticked(th)
        assert th.hosts.process_signals == [], "not before its grace"
        th.in_loop(lambda: clock.advance(60.0))
        audits = "SELECT target, owner, outcome, uid, user FROM audit WHERE action = 'enforce'"
        first = poll(
            lambda: [r for r in th.rows(audits) if "not delivered" in r[2]], what="the outcome"
        )
        assert first == [
            (
                "pid 600 on gpu01 GPU 2",
                "gtu_bob",
                f"SIGTERM not delivered: permission-denied: {refused}",
                0,
                "gputui-head",
            )
        ]
        uuid = th.hosts.uuid("gpu01", 2)
        ticked(th)
        assert th.hosts.process_signals == [("gpu01", GpuProcess(uuid, 600, 4321, 1600), "TERM")]
        # Still there a grace later: SIGKILL, once; then nothing more, however long it stays.
        th.in_loop(lambda: clock.advance(60.0))
        poll(lambda: len(th.hosts.process_signals) == 2, what="SIGKILL")  # type: ignore[union-attr]
        assert th.hosts.process_signals[1][2] == "KILL"
        th.in_loop(lambda: clock.advance(3600.0))
        sample_again(th)
        ticked(th)
        assert len(th.hosts.process_signals) == 2
        shown = flag(client, 600)
        assert shown is not None and shown["signalled"] == "KILL" and shown["signal_at"] is None
        outcomes = sorted(r[2].split(":")[0] for r in th.rows(audits))
        assert outcomes == ["SIGKILL not delivered", "SIGTERM not delivered"]
        assert [t.split(":")[0] for (t,) in th.rows(notices)] == [
            "pid 600 on gpu01 GPU 2 (python train.py) runs with no job or claim of gtu_bob there;"
            " each gets SIGTERM 1m after it was first seen",
            "pid 600 on gpu01 GPU 2 (python train.py) was sent SIGTERM",
            "pid 600 on gpu01 GPU 2 (python train.py) was sent SIGKILL",
        ]


@pytest.mark.parametrize("mode", ["off", "warn"])
def test_off_flags_nothing_and_exempt_users_and_graphics_are_never_flagged(
    tmp_path: Path, mode: str
) -> None:
    settings = rules(mode, exempt=("gtu_bob",))
    with ThreadedHead(tmp_path, LAYOUT, rules=settings) as th, LineClient(th.sock) as client:
        put(th, 0, proc(700, user="gtu_bob", uid=4321))
        put(th, 1, proc(701, user="gdm", uid=120, name="/usr/bin/gnome-shell", kind="graphics"))
        put(th, 2, proc(702))  # flagged unless the mode is off
        sample_again(th)
        ticked(th)
        pids = {f["pid"] for f in client.ok("cluster")["flags"]}
        assert pids == (set() if mode == "off" else {702})
        assert client.ok("queue")["flags"] == client.ok("cluster")["flags"]


def test_gputui_queue_prints_the_flags_under_the_queue(tmp_path: Path) -> None:
    with (
        ThreadedHead(tmp_path, LAYOUT, rules=rules("enforce", grace_s=600)) as th,
        LineClient(th.sock) as client,
    ):
        put(th, 3, proc(800, name="evil\x1b[31m-name"))
        poll(lambda: flag(client, 800), what="the flag")
        done = subprocess.run(
            [sys.executable, "-m", "gputui.entry", "--socket", str(th.sock), "queue"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "\x1b" not in done.stdout  # cleaned as the host's sample was read
    start = lines.index("FLAGS: 1 process(es) on GPUs their owners were not given")
    header, row = lines[start + 1], lines[start + 2]
    assert header.split() == ["USER", "GPU", "PID", "NAME", "KIND", "FOR", "ACTION"]
    assert row.split()[:5] == [MY_NAME, "gpu01:3", "800", "evil-name", "no-allocation"]
    assert row.endswith("SIGTERM in 9m"), row
    assert lines[start + 3] == "  no-allocation: no job or claim of theirs on the host"
