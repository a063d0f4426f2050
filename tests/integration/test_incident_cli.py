"""``gputui incident HOST[:GPU]`` on a simulated host whose helper runs for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import gputui

HOSTS = "hosts:\n  - name: a\n    local: true\n    sim: 2xa100-80gb,fault=xid:79@1\n"


def incident(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    return gputui(tmp_path, HOSTS, "incident", *args)


def test_a_gpu_timeline_has_its_xid_its_problem_and_its_readings(tmp_path: Path) -> None:
    code, out, err = incident(tmp_path, "a:1", "--since", "2d", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["host"] == "a" and report["gpu"] == 1
    kinds = [e["kind"] for e in report["entries"]]
    assert "xid" in kinds and "problem" in kinds and "sample" in kinds
    times = [e["time"] for e in report["entries"]]
    assert times == sorted(times)
    assert all(e["gpu"] in (None, 1) for e in report["entries"])
    xid = next(e for e in report["entries"] if e["kind"] == "xid")
    assert "Xid 79" in xid["text"] and "fallen off the bus" in xid["text"]
    assert report["notes"] == ["no head in hosts.yaml: no audit rows"]


def test_the_other_gpu_has_no_xid_and_the_host_has_both(tmp_path: Path) -> None:
    _, out, _ = incident(tmp_path, "a:0", "--json")
    assert "xid" not in {e["kind"] for e in json.loads(out)["entries"]}
    code, out, _ = incident(tmp_path, "a", "--since", "2d")
    assert code == 0
    assert out.splitlines()[0].startswith("Incident timeline for a, since ")
    assert "GPU 1  Xid 79" in out and "GPU 0  ok" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("b",), "'b': no such host"),
        (("a:x",), "GPU must be an index"),
        (("a", "--since", "yesterday"), "--since: not a span"),
    ],
)
def test_bad_arguments_exit_3_in_one_line(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    code, out, err = incident(tmp_path, *args)
    assert code == 3 and out == "" and said in err and "Traceback" not in err


async def test_with_a_head_its_readings_and_audit_rows_are_in_the_timeline() -> None:
    """The demo cluster's real head: a drain is an audit row, and the head's kept
    readings of the card are in the timeline."""
    import asyncio
    import subprocess
    import sys

    from clikit import ROOT

    from gputui.demo.cluster import DemoCluster
    from gputui.scheduler.client import HeadClient

    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        assert config.head is not None
        host = config.hosts[0].name
        sock = Path(config.head.socket)

        def call(op: str, args: dict[str, object]) -> dict[str, object]:
            with HeadClient(sock) as client:
                return client.call(op, args)

        deadline = asyncio.get_running_loop().time() + 30
        while not (await asyncio.to_thread(call, "incident", {"host": host, "gpu": 1}))["readings"]:
            assert asyncio.get_running_loop().time() < deadline, "the head kept no reading"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(call, "drain", {"target": f"{host}:1", "reason": "loud fan"})
        argv = [sys.executable, "-m", "gputui.entry", "--hosts", str(cluster.config_path)]
        done = await asyncio.to_thread(
            subprocess.run,
            [*argv, "incident", f"{host}:1", "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        entries = json.loads(done.stdout)["entries"]
        kinds = {e["kind"] for e in entries}
        assert {"reading", "audit", "sample"} <= kinds, kinds
        audit = [e for e in entries if e["kind"] == "audit"]
        assert any("drain" in e["text"] and "loud fan" in e["text"] for e in audit)
