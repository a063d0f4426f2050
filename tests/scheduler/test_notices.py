"""Notices are kept until read: a user who was not connected when their job was
preempted is told on their next connection (``gputui notices``, or a console's
subscription), once; another user never sees them; and ``show`` keeps the last
preemption after the job's reason has moved on. A real head, real Unix users."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll
from test_authz import ADMINS, People, people  # noqa: F401 (the fixture)

from gputui.cli import verbs
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head.actions import Rules

SCHED = SchedulerConfig.model_validate({"preemption": {"min_runtime_minutes": 0}}, strict=False)


@pytest.fixture
def th(people: People) -> Iterator[ThreadedHead]:  # noqa: F811 (the fixture)
    tmp = Path(tempfile.mkdtemp(prefix="gputui-notices-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        with ThreadedHead(tmp, {"gpu01": 4}, admin_group=ADMINS, rules=Rules(sched=SCHED)) as h:
            yield h
            assert h.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _job(c: LineClient, job_id: int) -> dict[str, Any]:
    return dict(c.ok("show", {"job_id": job_id})["job"])


def test_a_preemption_reaches_its_owner_on_their_next_connection_once(
    th: ThreadedHead,
    people: People,  # noqa: F811 (the fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, bob = people.alice, people.bob
    low = alice.ok(th.sock, "submit", {"argv": ["train"], "gpus": 4, "priority": "low"})
    low_id = low["job"]["id"]  # alice's process has ended: she is not connected
    with LineClient(th.sock) as root:
        poll(lambda: _job(root, low_id)["state"] == "running", what="alice's job running")
        urgent = root.ok("submit", {"argv": ["fix"], "gpus": 4, "priority": "urgent"})
        urgent_id = urgent["job"]["id"]
        poll(lambda: _job(root, urgent_id)["state"] == "running", what="the urgent job")
        requeued = poll(lambda: (j := _job(root, low_id))["requeues"] == 1 and j)
    why = f"preempted for job {urgent_id} (urgent, root)"
    # The reason has moved on to why it waits now; show keeps the preemption.
    assert requeued["state"] == "queued" and why not in requeued["reason"]
    # Back in line, it shows no run: its last one's host, GPUs and times are gone.
    assert requeued["host"] is None and requeued["gpu_uuids"] == []
    assert requeued["started_at"] is None and requeued["exit_signal"] is None
    shown = alice.ok(th.sock, "show", {"job_id": low_id})["job"]
    assert shown["preempted_by"].startswith(why) and shown["preempted_at"] > 0
    assert shown["preemptible"] is True  # its class is preemptible
    # Her next connection gets what happened while she was away, once.
    first = alice.ok(th.sock, "notices")["notices"]
    assert [n["job_id"] for n in first] == [low_id] * len(first) and len(first) >= 2, first
    assert any(why in n["text"] for n in first) and all(n["unread"] for n in first), first
    again, everything = alice.calls(th.sock, ("notices", {}), ("notices", {"all": True}))
    assert again["result"]["notices"] == []
    assert [n["id"] for n in everything["result"]["notices"]] == [n["id"] for n in first]
    assert not any(n["unread"] for n in everything["result"]["notices"])
    # Another user sees none of them, read or not, and cannot mark them.
    assert bob.ok(th.sock, "notices", {"all": True})["notices"] == []
    # A console connecting later gets the notices it missed in its subscription.
    with LineClient(th.sock) as root:
        root.ok("cancel", {"job_id": low_id, "reason": "the test is over"})
    subscribed, resubscribed = alice.calls(th.sock, ("subscribe", {}), ("subscribe", {}))
    told = subscribed["result"]["notices"]
    assert [n["job_id"] for n in told] == [low_id] and "cancel" in told[0]["text"]
    assert resubscribed["result"]["notices"] == []
    # The CLI shows them as mail does (root's own: its urgent job started).
    code = verbs.main(["--socket", str(th.sock), "notices", "--all"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("*") and f"job {urgent_id} (fix) started" in out
    assert verbs.main(["--socket", str(th.sock), "notices"]) == 0
    assert capsys.readouterr().out == "no unread notices\n"
    code = verbs.main(["--socket", str(th.sock), "show", str(low_id)])
    assert f"last preempted: {why}" in capsys.readouterr().out
