"""The demo cluster: real SSH servers, real helpers, real workloads, nothing left over."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from typing import Any

import pytest

from gputui.config.loader import load_config
from gputui.demo.cluster import DIR_PREFIX, OWNER_FILE, DemoCluster, _me, split_gpus, sweep_stale
from gputui.telemetry import HostStatus


def test_gpus_are_spread_over_hosts() -> None:
    assert split_gpus(4, 20) == [5, 5, 5, 5]
    assert split_gpus(1, 1) == [1]
    assert split_gpus(3, 10) == [4, 3, 3]
    assert sum(split_gpus(50, 400)) == 400
    with pytest.raises(ValueError, match="cannot go round"):
        split_gpus(4, 2)


async def test_demo_cluster_comes_up_live_and_cleans_up(kit) -> None:
    cluster = DemoCluster(hosts=3, gpus=10)
    async with cluster:
        directory = cluster.directory
        assert directory is not None
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert load_config(cluster.config_path) == cluster.config()
        config = cluster.config()
        assert [h.name for h in config.hosts] == ["gpu01", "gpu02", "gpu03"]
        fleet = await kit.start_fleet(config)
        await kit.wait_for(
            lambda: all(
                s.status is HostStatus.LIVE and s.sample is not None
                for s in fleet.snapshots().values()
            ),
            what="every host live",
        )
        counts = [len(s.hello.gpus) for s in fleet.snapshots().values()]
        assert counts == [4, 3, 3]

        expected = {(w.host, w.gpu_uuid, w.pid, w.user) for w in cluster.workloads}
        assert len(expected) == 6

        def visible() -> set[tuple[str, str, int, str | None]]:
            return {
                (s.name, g.uuid, p.pid, p.user)
                for s in fleet.snapshots().values()
                if s.sample is not None
                for g in s.sample.gpus
                for p in g.processes
            }

        await kit.wait_for(lambda: expected <= visible(), what="workloads on their GPUs")
        seen = visible()
        assert all(any(s[2] == pid for s in seen) for _, _, pid, _ in expected)
        commands = {
            p.command
            for s in fleet.snapshots().values()
            for g in s.sample.gpus
            for p in g.processes
        }
        assert any("train.py --model resnet50" in c for c in commands)
        if os.geteuid() == 0:
            assert len({w.user for w in cluster.workloads}) >= 2
        else:
            me = pwd.getpwuid(os.getuid()).pw_name
            assert {w.user for w in cluster.workloads} == {me}
        helpers = [pid for s in cluster.servers for pid in s.command_pids()]
        assert len(helpers) == 3
        await fleet.close()
        pids = [w.pid for w in cluster.workloads]

    assert cluster.directory is None and not directory.exists()
    assert not [p for p in pids + helpers if os.path.exists(f"/proc/{p}")]


async def test_two_demos_at_once_see_only_their_own_cards_and_processes(kit) -> None:
    """Two teammates' demos on one machine: the same host names, the same models, a
    workload on GPU 0 of gpu01 in each; each console sees its own cards and its own
    workload, never the other's."""
    async with (
        DemoCluster(hosts=1, gpus=2, workloads=1) as one,
        DemoCluster(hosts=1, gpus=2, workloads=1) as two,
    ):
        assert one.cluster_id != two.cluster_id
        seen: list[tuple[set[str], set[int]]] = []
        for cluster in (one, two):
            fleet = await kit.start_fleet(cluster.config())
            (workload,) = cluster.workloads
            snap = await kit.wait_for(
                lambda f=fleet, w=workload: (
                    (s := kit.snap(f, "gpu01")).sample is not None
                    and any(p.pid == w.pid for g in s.sample.gpus for p in g.processes)
                    and s
                ),
                what="the demo's own workload on its GPU",
            )
            uuids = {g.uuid for g in snap.hello.gpus}
            assert workload.gpu_uuid in uuids
            pids = {p.pid for g in snap.sample.gpus for p in g.processes}
            seen.append((uuids, pids))
            await fleet.close()
        (uuids_one, pids_one), (uuids_two, pids_two) = seen
        assert uuids_one.isdisjoint(uuids_two)
        assert pids_one == {one.workloads[0].pid}
        assert pids_two == {two.workloads[0].pid}


async def test_one_host_one_gpu(kit) -> None:
    async with DemoCluster(hosts=1, gpus=1) as cluster:
        fleet = await kit.start_fleet(cluster.config())
        snap = await kit.wait_for(
            lambda: (s := kit.snap(fleet, "gpu01")).sample is not None and s, what="sample"
        )
        assert len(snap.hello.gpus) == 1
        assert len(cluster.workloads) == 1


async def test_workloads_end_themselves_when_the_demo_is_killed(wait: Any) -> None:
    """A demo killed with SIGKILL runs no clean-up; its workloads must still go."""
    script = (
        "import os, sys\n"
        "from gputui.demo.workloads import start_workload\n"
        "w = start_workload(host='gpu01', gpu_uuid='GPU-00000000-0000-0000-0000-000000000000',"
        " gpu_index=0, job=('train.py',), user=__import__('getpass').getuser(),"
        " mem_mib=1024, util=50)\n"
        "print(w.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    demo = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert demo.stdout is not None
    pid = int(demo.stdout.readline())
    assert _alive(pid)
    demo.kill()
    demo.wait()
    await wait(lambda: not _alive(pid), timeout=10, what="the orphaned workload to end")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_the_next_demo_removes_what_a_killed_demo_left(tmp_path: Any) -> None:
    """A demo killed with SIGKILL leaves its directory; the next one removes it, and
    nothing else: not a running demo's, not one without an owner file, not a file."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs

    def made(name: str, owner: str | None) -> Any:
        path = tmp_path / f"{DIR_PREFIX}{name}"
        path.mkdir()
        (path / "hosts.yaml").write_text("hosts: []\n")
        if owner is not None:
            (path / OWNER_FILE).write_text(owner)
        return path

    dead = made("dead", f"{gone.pid} 12345")
    reused = made("reused", f"{os.getpid()} 1")  # this pid now, but another process then
    alive = made("alive", _me())
    unowned = made("unowned", None)
    garbage = made("garbage", "not a pid")
    (tmp_path / f"{DIR_PREFIX}file").write_text("x")
    other = tmp_path / "unrelated"
    other.mkdir()
    assert sorted(sweep_stale(tmp_path)) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert alive.exists() and unowned.exists() and garbage.exists() and other.exists()
    assert (tmp_path / f"{DIR_PREFIX}file").exists()


async def test_a_demo_records_its_owner_and_sweeps_before_it_starts(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    left = tmp_path / f"{DIR_PREFIX}left"
    left.mkdir()
    (left / OWNER_FILE).write_text("999999999 1")
    async with DemoCluster(hosts=1, gpus=1, workloads=0) as demo:
        assert demo.directory is not None and demo.directory.parent == tmp_path
        assert (demo.directory / OWNER_FILE).read_text() == _me()
        assert not left.exists()
