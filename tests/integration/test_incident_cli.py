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
