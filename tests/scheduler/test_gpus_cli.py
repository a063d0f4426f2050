"""``gputui gpus`` against a real head (real SQLite file, real socket; the hosts
scripted, their faults in the samples): every GPU with its state, holder, use and why
it is unavailable, at 80 columns; ``--free``, ``--pool`` and ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import gpus, verbs
from gputui.config.models import HealthThresholds
from gputui.wire.messages import ProcessSample

QUICK = HealthThresholds(hw_slowdown_minutes=1, hw_slowdown_window_minutes=1)


def _hosts() -> ScriptedHosts:
    hosts = ScriptedHosts({"node1": 4, "node2": 2})
    hosts.faults["node1"] = {
        0: {"mem_used_mib": 20480, "mem_total_mib": 81920},
        2: {"throttle": ("hw_slowdown",)},
    }
    hosts.processes["node1"] = {1: (ProcessSample(pid=4242, uid=4242, user="bob"),)}
    hosts.util["node1"] = {1: 77, 3: 5}
    return hosts


def _cli(th: ThreadedHead, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = verbs.main(["--socket", str(th.sock), "gpus", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _states(rows: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(f"{r['host']}:{r['index']}", r["state"], r["holder"]) for r in rows]


def test_every_gpu_with_its_state_holder_use_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with (
        ThreadedHead(tmp_path, {"node1": 4, "node2": 2}, scripted=_hosts(), health=QUICK) as th,
        LineClient(th.sock) as c,
    ):
        c.ok("drain", {"target": "node2:1", "reason": "fan noise"})
        claim = c.ok("claim", {"gpus": 1})["claim"]
        assert claim["state"] == "active"
        ident = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": ident})["job"]["state"] == "running", what="job")

        code, out, err = _cli(th, capsys, "--json")
        assert code == 0, err
        answer = json.loads(out)
        job = {"kind": "job", "id": ident, "user": "root"}
        assert _states(answer["gpus"]) == [
            ("node1:0", "free", None),
            ("node1:1", "rogue", {"kind": "process", "pid": 4242, "user": "bob", "processes": 1}),
            ("node1:2", "unhealthy", None),
            ("node1:3", "job", job),
            ("node2:0", "claimed", {"kind": "claim", "id": claim["id"], "user": "root"}),
            ("node2:1", "drained", None),
        ]
        first = answer["gpus"][0]
        assert first["why"] == "20.0 GiB held by no process (used last)"
        assert (first["mem_used_mib"], first["mem_total_mib"]) == (20480, 81920)
        assert answer["gpus"][1]["util"] == 77
        assert answer["gpus"][2]["why"] == "HW slowdown in 1 of the last 1 minutes"
        assert answer["gpus"][5]["why"] == "drained by root: fan noise"

        code, out, _ = _cli(th, capsys)
        lines = out.splitlines()
        assert code == 0 and all(len(line) <= 80 for line in lines), lines
        assert lines[0].split() == ["GPU", "STATE", "HOLDER", "UTIL", "MEMORY", "WHY"]
        assert lines[1].startswith("node1:0  free")
        assert lines[1].endswith("20.0/80G  20.0 GiB held by no process (…")
        assert "pid 4242 bob" in lines[2] and "77%" in lines[2]
        assert lines[2].endswith("no job or claim on it")
        assert f"j{ident} root" in lines[4] and f"c{claim['id']} root" in lines[5]

        code, out, _ = _cli(th, capsys, "--free")
        assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["GPU", "node1:0"]

        code, out, _ = _cli(th, capsys, "--pool", "a100", "--free", "--json")
        assert [r["index"] for r in json.loads(out)["gpus"]] == [0]

        code, out, err = _cli(th, capsys, "--pool", "h100")
        assert code == 1 and out == ""
        assert err == "gputui gpus: no pool named 'h100' (pools: a100)\n"

        c.ok("release", {"all": True})
        c.ok("undrain", {"target": "node2:1"})
        code, out, _ = _cli(th, capsys, "--free")
        assert [line.split()[0] for line in out.splitlines()] == [
            "GPU", "node1:0", "node2:0", "node2:1",
        ]  # fmt: skip
        assert th.problems == []


def test_nothing_free_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ThreadedHead(tmp_path, {"node1": 1}) as th, LineClient(th.sock) as c:
        c.ok("claim", {"gpus": 1})
        code, out, _ = _cli(th, capsys, "--free")
        assert (code, out) == (0, "no free GPU now\n")


def test_the_table_fits_the_width_it_is_given() -> None:
    row = {
        "host": "a-rather-long-host-name",
        "index": 7,
        "pool": "a100-80g",
        "state": "rogue",
        "holder": {"kind": "process", "pid": 123456, "user": "someone-long", "processes": 3},
        "util": 100,
        "mem_used_mib": 81000,
        "mem_total_mib": 81920,
        "why": "x" * 200,
    }
    for width in (60, 80, 120):
        lines = gpus.table([row], width, pools=True)
        assert all(len(line) <= width for line in lines), (width, lines)
    assert "+2" in gpus.table([row], 80, pools=True)[1]
    assert gpus.holder_text({"kind": "job", "id": 3, "user": "\x1b[31mx"}) == "j3 ?[31mx"


def _card(uuid: str) -> Any:
    from gputui.scheduler.head.gpufacts import GpuFacts

    blank: dict[str, Any] = dict.fromkeys(
        ("drained_by", "drain_reason", "drained_at", "fence_code", "fence_reason", "fenced_at")
    )
    blank.update(fence_clears=None, fence_waived=None, fence_waived_at=None)
    return GpuFacts(uuid, "node1", 0, "A100", 81920, "a100", present=True, **blank)


def test_a_card_with_only_a_jobs_stray_process_is_stray_as_the_console_says() -> None:
    """The ownership flags judge a process of a job outside its GPUs STRAY and one of
    nobody's ROGUE; ``gpus`` names the card's state the same way."""
    from gputui.config.scheduler import Placement
    from gputui.scheduler.head import gpu_table
    from gputui.scheduler.policy.cards import ROGUE, CardProblem
    from gputui.wire.messages import GpuSample

    sample = GpuSample(index=0, uuid="GPU-a", processes=(ProcessSample(pid=7, user="bob"),))
    found = {"GPU-a": (CardProblem(ROGUE, "pid 7 (bob) on no job or claim"),)}

    def seen(strays: frozenset[str]) -> Any:
        live, samples = {"node1": True}, {"GPU-a": sample}
        return gpu_table.Seen(
            (_card("GPU-a"),), frozenset(), live, samples, found, frozenset(), strays
        )

    rules = Placement()
    assert gpu_table.card_state(_card("GPU-a"), seen(frozenset()), None, rules)[0] == "rogue"
    assert (
        gpu_table.card_state(_card("GPU-a"), seen(frozenset({"GPU-a"})), None, rules)[0] == "stray"
    )


@given(
    names=st.lists(
        st.text(st.characters(categories=("L", "N")), min_size=1, max_size=30),
        min_size=1,
        max_size=6,
    ),
    width=st.integers(60, 200),
)
def test_any_table_fits_its_width_in_cells_wide_characters_too(
    names: list[str], width: int
) -> None:
    """A user or reason in CJK takes two cells a character: the table counts cells, not
    characters (it counted characters, and such a line ran past the terminal)."""
    from gputui.cli.layout import cells

    rows = [
        {
            "host": f"node{i}",
            "index": i,
            "state": "job",
            "holder": {"kind": "job", "id": i, "user": name},
            "util": 50,
            "mem_used_mib": 1024,
            "mem_total_mib": 81920,
            "why": "数据 " * 20 + name,
        }
        for i, name in enumerate(names)
    ]
    for line in gpus.table(rows, width, pools=False):
        assert cells(line) <= width, line
    whole = gpus.table(rows, None, pools=False)
    assert all(r["why"] in line for r, line in zip(rows, whole[1:], strict=True))
