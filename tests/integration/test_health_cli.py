"""``gputui health`` from the shell, on simulated hosts whose helpers run for real.

Each host is ``local: true`` with ``sim:``: the real helper runs as a child process on
simulated NVML, with the fault the spec names; one host is a closed port.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import ROOT, gputui

GPUTUI = [sys.executable, "-m", "gputui.entry"]


def subprocess_run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def health(tmp_path: Path, hosts: str, *args: str) -> tuple[int, str, str]:
    return gputui(tmp_path, "hosts:\n" + hosts, "health", *args)


def sim(name: str, spec: str) -> str:
    return f"  - name: {name}\n    local: true\n    sim: {spec}\n"


def test_nothing_wrong_exits_0(tmp_path: Path) -> None:
    code, out, err = health(tmp_path, sim("a", "2xa100-80gb"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "ok" and report["problems"] == [] and report["hosts"] == 1


def test_warnings_only_exit_1(tmp_path: Path) -> None:
    code, out, err = health(tmp_path, sim("a", "2xrtx3090,fault=throttle@1"), "--json")
    assert code == 1, err
    problems = json.loads(out)["problems"]
    assert {p["severity"] for p in problems} == {"warn"}
    assert all(p["host"] == "a" and p["gpu"] == 1 for p in problems)
    # GeForce cards have no ECC: that check is unknown, and said so.
    assert {"host": "a", "gpu": 0, "check": "ECC", "reason": "NotSupported"} in json.loads(out)[
        "unknown"
    ]


def test_something_critical_exits_2_and_is_ranked_first(tmp_path: Path) -> None:
    hosts = sim("a", "2xrtx3090,fault=throttle@0") + sim("b", "2xa100-80gb,fault=xid:79@1")
    hosts += "  - name: c\n    address: 127.0.0.1\n    port: 1\n"
    code, out, err = health(tmp_path, hosts, "--json")
    assert code == 2, err
    problems = json.loads(out)["problems"]
    assert [p["severity"] for p in problems] == sorted(
        (p["severity"] for p in problems), key=["crit", "warn", "info"].index
    )
    codes = {(p["host"], p["code"]) for p in problems}
    assert ("b", "xid-79") in codes and ("c", "unreachable") in codes
    xid = next(p for p in problems if p["code"] == "xid-79")
    assert xid["gpu"] == 1 and xid["action"] == "reboot the host"


def test_the_text_table_and_one_host_only(tmp_path: Path) -> None:
    hosts = sim("a", "2xa100-80gb,fault=xid:79@1") + sim("b", "1xa100-80gb")
    code, out, _ = health(tmp_path, hosts, "--host", "b")
    assert code == 0 and out.strip() == "no problems on 1 host"
    code, out, _ = health(tmp_path, hosts)
    assert code == 2
    assert out.splitlines()[0].split() == [
        "SEV",
        "HOST",
        "GPU",
        "PROBLEM",
        "FIRST",
        "SEEN",
        "N",
        "WHAT",
        "TO",
        "DO",
    ]
    assert "GPU has fallen off the bus" in out


@pytest.mark.parametrize(
    ("hosts", "args", "said"),
    [
        ("  - name: a\n    bogus: 1\n", (), "bogus"),
        (sim("a", "1xa100-80gb"), ("--host", "zz"), "--host 'zz': no such host"),
        (sim("a", "1xa100-80gb"), ("--wait", "-1"), "--wait"),
    ],
)
def test_a_check_that_cannot_run_exits_3_in_one_line(
    tmp_path: Path, hosts: str, args: tuple[str, ...], said: str
) -> None:
    code, out, err = health(tmp_path, hosts, *args)
    assert code == 3 and out == ""
    assert said in err and "Traceback" not in err


async def test_with_a_head_its_drains_are_in_the_report(tmp_path: Path) -> None:
    """The demo cluster's real head over loopback SSH: a drained card is listed."""
    import asyncio

    from gputui.demo.cluster import DemoCluster
    from gputui.scheduler.client import HeadClient

    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        assert config.head is not None
        host = config.hosts[0].name

        def call(op: str, args: dict[str, object]) -> dict[str, object]:
            assert config.head is not None
            with HeadClient(Path(config.head.socket)) as client:
                return client.call(op, args)

        deadline = asyncio.get_running_loop().time() + 30
        while len((await asyncio.to_thread(call, "cluster", {})).get("gpus") or []) < 2:
            # The head learns the host's GPUs from its first sample.
            assert asyncio.get_running_loop().time() < deadline, "the head never saw the GPUs"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(call, "drain", {"target": f"{host}:1", "reason": "bad fan"})
        # The head's board takes the drain in on its next tick (about a second).
        while not any(
            p["code"] == "drained"
            for p in (await asyncio.to_thread(call, "health", {}))["problems"]
        ):
            assert asyncio.get_running_loop().time() < deadline, "the board never showed it"
            await asyncio.sleep(0.05)
        done = await asyncio.to_thread(
            subprocess_run, [*GPUTUI, "--hosts", str(cluster.config_path), "health", "--json"]
        )
        report = json.loads(done.stdout)
        drained = [p for p in report["problems"] if p["code"] == "drained"]
        assert [(p["host"], p["gpu"], p["severity"]) for p in drained] == [(host, 1, "info")]
        assert "bad fan" in drained[0]["title"] and report["notes"] == []
        # The head says which checks do not apply to its cards, as a probe would.
        assert report["not_applicable"] == NOT_APPLICABLE_DEMO, report["not_applicable"]
        # The demo's own workloads may be flagged too: the code follows the worst problem.
        assert done.returncode == {"ok": 0, "warn": 1, "crit": 2}[report["status"]]
        assert drained[0]["key"] == f"{host}:1:drained"
        base = [*GPUTUI, "--hosts", str(cluster.config_path), "health"]
        acked = await asyncio.to_thread(
            subprocess_run, [*base, "--ack", f"{host}:1:drained", "--note", "fan on order"]
        )
        assert (acked.returncode, acked.stdout) == (0, f"acknowledged {host}:1:drained\n")
        text = await asyncio.to_thread(subprocess_run, [*base, "--keys"])
        assert text.returncode in (0, 1) and "[ack]" in text.stdout  # an info note, acked
        assert re.search(rf"^{host}:1:drained +drained: bad fan$", text.stdout, re.M)
        wrong = await asyncio.to_thread(
            subprocess_run, [*base, "--ack", f"{host}:0:nothing", "--note", "x"]
        )
        assert wrong.returncode == 3 and "no such problem now" in wrong.stderr
        assert "Traceback" not in wrong.stderr


NOT_APPLICABLE_DEMO = {"NVSwitch fabric": 2, "retired pages": 2}
"""The demo's first host: two A100s (no NVSwitch fabric; row remapping, not page retirement)."""


def test_a_head_that_does_not_answer_means_probing_with_a_note(tmp_path: Path) -> None:
    head = f"head:\n  host: localhost\n  socket: {tmp_path / 'nobody.sock'}\n"
    code, out, err = gputui(tmp_path, head + "hosts:\n" + sim("a", "1xa100-80gb"), "health")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "no problems on 1 host"
    assert lines[1].startswith("note: the head did not answer (") and lines[1].endswith(
        "): probed the hosts directly"
    )
