"""An admin's drain and the head's own fence, on a real head (real SQLite file, real
socket; the hosts scripted, their faults injected into the samples they send).

A drained card takes no new job or claim while what runs there finishes; a drain
and a fence never clear each other; a fence survives a restart of the head; a
fence whose condition is gone lifts by itself; every change has its audit row.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll, refusal

HOST = "gpu01"


def gpu_row(th: ThreadedHead, index: int) -> dict[str, Any]:
    cols = "drained_by, drain_reason, drained_at, fence_code, fence_reason, fenced_at, fence_clears"
    (row,) = th.rows(f'SELECT {cols} FROM gpu WHERE host = ? AND "index" = ?', HOST, index)
    return dict(zip(cols.split(", "), row, strict=True))


def audits(th: ThreadedHead) -> list[tuple[str, str, str, str]]:
    return [
        (r[0], r[1], r[2], r[3])
        for r in th.rows("SELECT user, action, target, outcome FROM audit ORDER BY id")
    ]


def job(c: LineClient, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = c.ok("show", {"job_id": job_id})["job"]
    return found


def state_is(c: LineClient, job_id: int, state: str, reason: str | None = None) -> bool:
    now = job(c, job_id)
    return bool(now["state"] == state and (reason is None or now["reason"] == reason))


def test_a_drained_card_takes_no_new_work_while_its_running_job_finishes(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 2}) as th, LineClient(th.sock) as c:
        first = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: state_is(c, first, "running"), what="the first job running")
        (uuid,) = job(c, first)["gpu_uuids"]
        index = int(uuid.rsplit("-", 1)[1])
        drained = c.ok("drain", {"target": f"{HOST}:{index}", "reason": "fan noise"})
        assert drained["outcome"] == "drained; 1 holder told"
        # Its holder hears of it, once: draining it again only updates the reason.
        told = "SELECT job_id, text FROM notice WHERE kind = 'admin'"
        assert th.rows(told) == [
            (
                first,
                f"job {first} on {HOST}:{index}: drained by root (admin): fan noise;"
                " what runs there goes on, no new work lands there",
            )
        ]
        again = c.ok("drain", {"target": f"{HOST}:{index}", "reason": "fan noise, loud"})
        assert again["outcome"] == "already drained by root; reason updated"
        assert len(th.rows(told)) == 1
        assert drained["gpus"][0]["state"] == "drained"
        assert drained["gpus"][0]["drain"]["reason"] == "fan noise"
        # Both GPUs would fit it, but one is drained: it waits, and says why.
        second = c.ok("submit", {"argv": ["big"], "gpus": 2})["job"]["id"]
        poll(lambda: state_is(c, second, "queued", "Drained"), what="the big job Drained")
        # The drained card cannot be claimed by name either (now or queued).
        busy = c.ask("claim", {"gpu_refs": [uuid], "wait": False}, rid="c1")
        assert refusal(busy)[0] == "busy"
        waiting = c.ok("claim", {"gpu_refs": [f"{HOST}:{index}"]})["claim"]
        assert waiting["state"] == "waiting"
        # What ran there goes on, and finishes as it would have.
        assert state_is(c, first, "running")
        (launch,) = [s for s in th.hosts.launches if s.job_id == first] if th.hosts else []
        th.in_loop(lambda: th.hosts.finish(HOST, launch.key) if th.hosts else None)
        poll(lambda: state_is(c, first, "completed"), what="the first job completed")
        assert state_is(c, second, "queued", "Drained")  # still: the card is free but drained
        claim_is = "SELECT state, reason FROM claim WHERE id = ?"
        assert th.rows(claim_is, waiting["id"]) == [("waiting", "Drained")]
        queue = c.ok("queue")
        assert [(g["host"], g["index"], g["state"]) for g in queue["unavailable"]] == [
            (HOST, index, "drained")
        ]
        c.ok("undrain", {"target": f"{HOST}:{index}"})
        # First in line, the big job now gets both cards; the claim waits behind it.
        poll(lambda: state_is(c, second, "running"), what="the big job running")
        assert th.rows("SELECT state FROM claim") == [("waiting",)]
        assert gpu_row(th, index)["drained_at"] is None
        assert [a[:3] for a in audits(th)] == [
            ("root", "drain", f"{HOST}:{index}"),
            ("root", "drain", f"{HOST}:{index}"),
            ("root", "undrain", f"{HOST}:{index}"),
        ]
        assert th.problems == []


def test_a_host_drain_keeps_new_work_off_all_its_cards(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 2, "gpu02": 1}) as th, LineClient(th.sock) as c:
        c.ok("drain", {"target": HOST, "reason": "rack maintenance"})
        pinned = c.ok("submit", {"argv": ["x"], "gpus": 1, "host": HOST})["job"]["id"]
        poll(lambda: state_is(c, pinned, "queued", "Drained"), what="the pinned job Drained")
        anywhere = c.ok("submit", {"argv": ["y"], "gpus": 1})["job"]["id"]
        poll(lambda: job(c, anywhere).get("host") == "gpu02", what="the free job on gpu02")
        cluster = c.ok("cluster")
        assert cluster["hosts"][HOST]["drain"]["reason"] == "rack maintenance"
        assert {g["state"] for g in cluster["gpus"] if g["host"] == HOST} == {"drained"}
        # A GPU of a drained host is not drained by itself: undrain says where the drain is.
        answer = c.ask("undrain", {"target": f"{HOST}:0"}, rid="u1")
        assert refusal(answer) == (
            "bad-state",
            f"undrain {HOST}:0: not drained; its host is: undrain {HOST}",
        )
        c.ok("undrain", {"target": HOST})
        poll(lambda: state_is(c, pinned, "running"), what="the pinned job running")
        assert th.problems == []


def test_drain_and_fence_do_not_clear_each_other(tmp_path: Path) -> None:
    target = f"{HOST}:1"
    with ThreadedHead(tmp_path, {HOST: 2}) as th, LineClient(th.sock) as c:
        c.ok("drain", {"target": target, "reason": "suspect card"})
        th.in_loop(lambda: th.hosts.put_xid(HOST, 1, 79, time.time()) if th.hosts else None)
        poll(lambda: gpu_row(th, 1)["fence_code"] == "xid-79", what="the Xid 79 fence")
        c.ok("undrain", {"target": target, "reason": "fan replaced"})
        row = gpu_row(th, 1)
        assert row["drained_at"] is None and row["fence_code"] == "xid-79"  # still fenced
        assert row["fence_clears"] == "reboot"
        big = c.ok("submit", {"argv": ["big"], "gpus": 2})["job"]["id"]
        poll(lambda: state_is(c, big, "queued", "Fenced"), what="the big job Fenced")
        c.ok("drain", {"target": target, "reason": "wait for the vendor"})
        # unfence needs a reason, and lifts the fence but not the drain.
        answer = c.ask("unfence", {"target": target}, rid="f1")
        assert refusal(answer)[0] == "reason-required"
        lifted = c.ok("unfence", {"target": target, "reason": "vendor says the card is fine"})
        assert lifted["gpus"][0]["state"] == "drained" and lifted["gpus"][0]["fence"] is None
        row = gpu_row(th, 1)
        assert row["fence_code"] is None and row["drain_reason"] == "wait for the vendor"
        poll(lambda: state_is(c, big, "queued", "Drained"), what="the big job Drained")
        # The Xid still in the host's snapshots does not fence the card again ...
        th.in_loop(lambda: th.hosts.sample_again(HOST) if th.hosts else None)
        c.ok("undrain", {"target": target})
        poll(lambda: state_is(c, big, "running"), what="the big job running")
        assert gpu_row(th, 1)["fence_code"] is None
        # ... but a new Xid 79 does.
        th.in_loop(lambda: th.hosts.put_xid(HOST, 1, 79, time.time() + 1) if th.hosts else None)
        poll(lambda: gpu_row(th, 1)["fence_code"] == "xid-79", what="the second fence")
        assert state_is(c, big, "running")  # what runs there is left to finish
        # ... and its owner is told; the first fence found the card free: no one to tell.
        (notice,) = th.rows("SELECT job_id, text FROM notice WHERE kind = 'fence'")
        assert notice[0] == big
        assert notice[1] == (
            f"job {big} on {HOST}:1: fenced by the head: Xid 79: GPU has fallen off the bus;"
            " the card is unhealthy, work there may fail; no new work lands there"
        )
        assert [(a[0], a[1]) for a in audits(th)] == [
            ("root", "drain"),
            ("gputui-head", "fence"),
            ("root", "undrain"),
            ("root", "drain"),
            ("root", "unfence"),
            ("root", "undrain"),
            ("gputui-head", "fence"),
        ]
        assert audits(th)[4][3] == "fence xid-79 lifted (still drained)"
        assert th.problems == []


def test_a_fence_lifts_when_its_condition_clears(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 1}) as th, LineClient(th.sock) as c:
        th.in_loop(lambda: th.hosts.put_fault(HOST, 0, ecc_uncorrected=3) if th.hosts else None)
        poll(lambda: gpu_row(th, 0)["fence_code"] == "ecc-uncorrected", what="the ECC fence")
        waiting = c.ok("submit", {"argv": ["x"], "gpus": 1})["job"]["id"]
        poll(lambda: state_is(c, waiting, "queued", "Fenced"), what="the job Fenced")
        (gpu,) = c.ok("queue")["unavailable"]
        assert gpu["state"] == "unhealthy" and gpu["fence"]["clears"] == "condition"
        # A sample with no ECC reading says nothing: the fence holds.
        th.in_loop(lambda: th.hosts.put_fault(HOST, 0) if th.hosts else None)
        th.in_loop(lambda: th.hosts.put_fault(HOST, 0) if th.hosts else None)
        assert state_is(c, waiting, "queued", "Fenced")
        # A reset: the count reads 0 again, and the fence lifts.
        th.in_loop(lambda: th.hosts.put_fault(HOST, 0, ecc_uncorrected=0) if th.hosts else None)
        poll(lambda: state_is(c, waiting, "running"), what="the job running")
        assert gpu_row(th, 0)["fence_code"] is None
        assert [(a[0], a[1], a[3]) for a in audits(th)] == [
            ("gputui-head", "fence", "fenced (ecc-uncorrected; clears on condition)"),
            ("gputui-head", "unfence", "fence ecc-uncorrected lifted"),
        ]
        assert th.problems == []


def test_a_fence_survives_a_head_restart(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 2}) as th:
        th.in_loop(lambda: th.hosts.put_xid(HOST, 0, 48, time.time()) if th.hosts else None)
        poll(lambda: gpu_row(th, 0)["fence_code"] == "xid-48", what="the Xid 48 fence")
        fenced_at = gpu_row(th, 0)["fenced_at"]
    # A new head on the same file; its hosts no longer send the Xid (the helper
    # restarted): a fence that clears on reboot holds all the same.
    with ThreadedHead(tmp_path, {HOST: 2}) as th, LineClient(th.sock) as c:
        big = c.ok("submit", {"argv": ["big"], "gpus": 2})["job"]["id"]
        poll(lambda: state_is(c, big, "queued", "Fenced"), what="the big job Fenced")
        th.in_loop(lambda: th.hosts.sample_again(HOST) if th.hosts else None)
        row = gpu_row(th, 0)
        assert (row["fence_code"], row["fenced_at"]) == ("xid-48", fenced_at)
        small = c.ok("submit", {"argv": ["small"], "gpus": 1})["job"]["id"]
        poll(lambda: job(c, small)["gpu_uuids"] == [f"GPU-{HOST}-0001"], what="on the good GPU")
        assert th.problems == []


def gputui(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(sock))
    return subprocess.run(
        [sys.executable, "-m", "gputui.entry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_shell_verbs_drain_list_and_audit(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 2}) as th:
        done = gputui(th.sock, "drain", f"{HOST}:1", "--reason", "fan noise")
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.splitlines()[0] == f"{HOST}:1: drained"
        assert "DRAINED by root" in done.stdout and "fan noise" in done.stdout
        missing = gputui(th.sock, "drain", f"{HOST}:1")
        assert missing.returncode == 2 and "--reason" in missing.stderr  # argparse: usage
        unknown = gputui(th.sock, "drain", "gpu99", "--reason", "x")
        assert unknown.returncode == 1
        assert unknown.stderr == "gputui drain: no host named 'gpu99' (hosts: gpu01)\n"
        queue = gputui(th.sock, "queue").stdout.splitlines()
        assert (
            queue[-2] == "UNAVAILABLE: 1 GPU(s) take no new work (drained by an admin, or fenced)"
        )
        assert re.fullmatch(rf"{HOST}:1 +DRAINED by root for \d+s: fan noise", queue[-1])
        not_fenced = gputui(th.sock, "unfence", f"{HOST}:1", "--reason", "x")
        assert not_fenced.stderr == f"gputui unfence: unfence {HOST}:1: not fenced\n"
        assert gputui(th.sock, "undrain", f"{HOST}:1").returncode == 0
        audit = gputui(th.sock, "audit").stdout.splitlines()
        assert [line.split()[3:5] for line in audit[1:]] == [
            ["drain", f"{HOST}:1"],
            ["undrain", f"{HOST}:1"],
        ]
        assert audit[0].split() == [
            "TIME", "ACTOR", "ACTION", "TARGET", "OWNER", "REASON", "OUTCOME",
        ]  # fmt: skip
        assert [line.split()[-1] for line in audit[1:]] == ["drained", "undrained"]
        assert "UNAVAILABLE" not in gputui(th.sock, "queue").stdout


def _reason(th: ThreadedHead, job_id: int) -> str:
    ((reason,),) = th.rows("SELECT reason FROM job WHERE id = ?", job_id)
    return str(reason)


def _reason_is(th: ThreadedHead, job_id: int, reason: str) -> Callable[[], bool]:
    return lambda: _reason(th, job_id) == reason


def test_with_no_usable_gpu_a_submission_gets_its_reason_without_a_pass_over_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission changes no other request's standing: where no GPU is usable, the
    head gives the new job its reason and leaves the rest of the queue alone (a long
    queue on a drained cluster costs nothing a submission); a real change (here a
    drain's new reason) gives every waiting job its reason again.

    A real change of the head's own (a host's sample late on a loaded machine, a health
    refresh) rightly re-reasons every job: the passes are watched, and a window where
    one came is tried again, so that the test reads only a window without one."""
    import sqlite3

    from gputui.scheduler.head import lifecycle

    changed: list[bool] = []  # for each pass, whether it came after a real change
    schedule = lifecycle.schedule

    def watched(tx: Any, ctx: Any, *args: Any, **kwargs: Any) -> Any:
        changed.append(bool(ctx.changed))
        return schedule(tx, ctx, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "schedule", watched)
    with ThreadedHead(tmp_path, {HOST: 1}) as th, LineClient(th.sock) as c:
        poll(lambda: len(c.ok("cluster")["gpus"]) == 1, what="the head seeing its GPU")
        c.ok("drain", {"target": HOST, "reason": "rack work"})
        first = c.ok("submit", {"argv": ["a"], "gpus": 1})["job"]["id"]
        poll(lambda: _reason(th, first) == "Drained", what="the first job Drained")
        for _ in range(5):
            # Behind the head's back: a reason no pass would give.
            with sqlite3.connect(th.db, timeout=10) as db:
                db.execute("UPDATE job SET reason = 'stale' WHERE id = ?", (first,))
            since = len(changed)
            second = c.ok("submit", {"argv": ["b"], "gpus": 1})["job"]["id"]
            after = c.ok("submit", {"argv": ["c"], "gpus": 1, "after": [first]})["job"]["id"]
            poll(_reason_is(th, second, "Drained"), what="the second job Drained")
            poll(_reason_is(th, after, "Dependency"), what="the dependent job waiting")
            reason = _reason(th, first)
            if not any(changed[since:]):
                assert reason == "stale"  # no pass went over the whole queue
                break
        else:
            raise AssertionError(f"a real change came in each of 5 windows: {changed}")
        c.ok("drain", {"target": HOST, "reason": "rack work, longer"})
        poll(lambda: _reason(th, first) == "Drained", what="every job's reason again")
        assert th.problems == []
