"""A head that lost a task it depends on stops, loudly: a real ``gputui head`` process
whose writer, timer or host watch dies (a fault injected into that one task by the
test's own launcher, nothing in the head) logs the task and its traceback and exits
1, so systemd starts it again; it never goes on answering half-alive. ``--check``
says how a running head's tasks are doing; a second head on a taken socket refuses
before it says it serves anything.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from headthread import poll
from test_durability import HeadProcess

from gputui.scheduler.client import HeadClient

# Runs ``gputui head`` with one of its tasks made to fail once the head serves.
LAUNCHER = textwrap.dedent(
    """
    import sys
    from gputui.entry import main
    from gputui.scheduler.head import daemon, fleet_hostops
    from gputui.scheduler.head.watch import hosts, meter

    broken, calls = sys.argv[1], [0]

    def failing(original):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] > 3:
                raise RuntimeError("injected fault in the " + broken)
            return original(*args, **kwargs)
        return call

    if broken == "writer":  # read by the writer before each batch
        hosts.HostWatch.slots = failing(hosts.HostWatch.slots)
    elif broken == "timer":
        meter.HeadMeter.tick = failing(meter.HeadMeter.tick)
    elif broken == "hosts":  # the hosts' stream ends
        original = fleet_hostops.FleetHosts.updates
        async def updates(self):
            async for snapshot in original(self):
                yield snapshot
                calls[0] += 1
                if calls[0] > 1:
                    return
        fleet_hostops.FleetHosts.updates = updates
    sys.exit(main(["head", *sys.argv[2:]]))
    """
)


def run_head(head: HeadProcess, broken: str, *extra: str) -> subprocess.Popen[bytes]:
    with head.log.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, broken, "--hosts", str(head.config), *extra],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )


def check(head: HeadProcess) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "gputui.entry", "head", "--check", "--hosts", str(head.config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr == "", done.stderr
    return done.returncode, done.stdout


@pytest.mark.parametrize("broken", ["writer", "timer", "hosts"])
def test_a_head_whose_task_dies_logs_it_and_exits_non_zero(tmp_path: Path, broken: str) -> None:
    head = HeadProcess(tmp_path)
    proc = run_head(head, broken)
    try:
        assert proc.wait(60) == 1, head.log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    log = head.log.read_text()
    assert f"CRITICAL head: the {broken} task ended (" in log, log
    if broken == "hosts":  # its stream ended: nothing raised
        assert "the hosts task ended (it returned)" in log, log
    else:  # the task's own traceback, in the head's log
        assert "Traceback" in log and f"RuntimeError: injected fault in the {broken}" in log, log
    stopped = [line for line in log.splitlines() if line.startswith("gputui head: stopped")]
    assert len(stopped) == 1 and stopped[0].startswith(f"gputui head: stopped: the {broken} task")
    assert not head.sock.exists(), "the socket of a stopped head is left behind"


def test_check_says_healthy_for_a_live_head_and_names_what_is_wrong_otherwise(
    tmp_path: Path,
) -> None:
    head = HeadProcess(tmp_path)
    code, out = check(head)  # nothing runs yet
    assert code == 1 and out.count("\n") == 1, out
    assert out.startswith("gputui head --check: head unreachable at "), out
    head.start()
    try:
        with HeadClient(head.sock) as client:
            poll(lambda: client.call("ping")["tasks"]["hosts"]["idle_s"] < 5, what="a sample")
            tasks = client.call("ping")["tasks"]
        assert set(tasks) == {
            "writer",
            "scheduler",
            "hosts",
            "timer",
            "pusher",
            "telemetry",
            "chat",
        }
        assert all(t["alive"] is True for t in tasks.values()), tasks
        assert tasks["writer"]["idle_s"] < 5 and tasks["writer"]["stale_after_s"] == 30.0
        code, out = check(head)
        assert code == 0, out
        assert out.startswith("gputui head --check: healthy (last progress: "), out
    finally:
        head.stop()


def test_a_second_head_on_a_taken_socket_refuses_before_it_says_it_serves(
    tmp_path: Path,
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = HeadProcess(tmp_path / "one")
    first.start()
    try:
        second = HeadProcess(tmp_path / "two")  # its own database, the first's socket
        second.config.write_text(
            second.config.read_text().replace(str(second.sock), str(first.sock))
        )
        done = subprocess.run(
            [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(second.config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done
        assert done.stdout == ""
        assert done.stderr == f"gputui head: another head is already serving {first.sock}\n"
        with HeadClient(first.sock) as client:  # the first goes on serving
            assert client.call("ping")["pong"] is True
    finally:
        first.stop()
