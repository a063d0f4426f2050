"""``gputui logs -f`` on a real head: a job preempted and requeued has a new run with
a log of its own, read from its start (the old run's offset would skip its first
lines, and show nothing until the new log outgrew the old one)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from headthread import LineClient, ThreadedHead, poll

from gputui.scheduler.head.actions import run_key

ROOT = Path(__file__).resolve().parents[2]
OLD = "".join(f"old run line {i}\n" for i in range(40))
NEW = "new run first line\nnew run second line\n"


def read_until(proc: subprocess.Popen[bytes], seen: bytearray, marker: str) -> None:
    """Read ``proc``'s stdout into ``seen`` until it holds ``marker`` (20 s at most)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + 20
    while marker.encode() not in seen:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        assert ready, f"no {marker!r} from gputui logs -f; it wrote {bytes(seen)!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"gputui logs -f ended before {marker!r}; it wrote {bytes(seen)!r}"
        seen += chunk


def test_logs_follow_shows_a_requeued_jobs_new_run_from_its_start(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th, LineClient(th.sock) as client:
        hosts = th.hosts
        assert hosts is not None
        job_id = client.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        first, second = run_key(job_id, 1), run_key(job_id, 2)
        th.in_loop(lambda: hosts.logs.update({first: OLD, second: NEW}))

        def job() -> dict[str, object]:
            found: dict[str, object] = client.ok("show", {"job_id": job_id})["job"]
            return found

        poll(lambda: job()["state"] == "running", what="the job to run")
        argv = ["--socket", str(th.sock), "logs", "-f", str(job_id)]
        follow = subprocess.Popen(
            [sys.executable, "-m", "gputui", *argv], cwd=ROOT, stdout=subprocess.PIPE
        )
        seen = bytearray()
        try:
            read_until(follow, seen, "old run line 39\n")
            client.ok("preempt", {"job_id": job_id})
            poll(
                lambda: job()["state"] == "running" and job()["launches"] == 2,
                what="the job to run again",
            )
            read_until(follow, seen, "new run second line\n")
            th.in_loop(lambda: hosts.finish("gpu01", second))
            rest, _ = follow.communicate(timeout=20)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
        seen += rest
        assert follow.returncode == 0
        mark = f"--- job {job_id}: run 2 (requeued) ---\n"
        assert seen.decode() == OLD + mark + NEW
