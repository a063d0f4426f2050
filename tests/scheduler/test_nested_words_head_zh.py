"""Words nested in words, on a real head (real SQLite file, real socket; the hosts
scripted): a line of several parts whose parts carry words of their own (force-free's
stop line with a kill the head refused, several problems that put a card last, a
health finding's title with its figures), a line past eight parts (force-free's
holders) and where a failed force-free stopped reach a Chinese client with no English
left but the data, while the English line and ``--json`` stay as they were."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll, refusal
from test_gpus_cli import QUICK

from gputui.cli import forcefree, verbs
from gputui.common import i18n
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer
from gputui.wire.messages import Event, ProcessSample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

HOST = "node1"
STRAYS = (
    ProcessSample(pid=4242, uid=4242, user="bob", command="python train.py"),
    ProcessSample(pid=4243, uid=4242, user="bob", command="python train.py"),
)
HOLDERS = [
    {
        "pid": 5000 + i,
        "user": "alice",
        "command": "python train.py",
        "devices": ["/dev/nvidia0"],
        "helper": i == 0,
    }
    for i in range(12)
]
# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

DATA = {"node", "bob", "alice", "root", "python", "train.py", "dev", "nvidia", "force-free"}


class Hosts(ScriptedHosts):
    """Scripted hosts that keep sending samples (as a helper does), whose jobs do not
    end when signalled (a kill stays ``killing``), whose stray processes go at SIGTERM
    leaving 20 GiB held, and whose GPU 0 is held by twelve processes (GPU 1's holders
    cannot be listed: a bug in the head's hands)."""

    def __init__(self, layout: dict[str, int]) -> None:
        super().__init__(layout)
        self._streaming = False

    async def start(self) -> None:
        await super().start()
        self._streaming = True
        self._tick()

    async def close(self) -> None:
        self._streaming = False

    def _tick(self) -> None:
        if not self._streaming:
            return
        for host in self.layout:
            self.sample_again(host)
        asyncio.get_running_loop().call_later(0.1, self._tick)

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer:
        self.signals.append((host, key, signal))
        return HostAnswer(True, value={"delivered": True})

    async def signal_process(self, host: str, process: GpuProcess, signal: str) -> HostAnswer:
        self.process_signals.append((host, process, signal))
        for index in range(self.layout[host]):
            if self.uuid(host, index) == process.gpu_uuid:
                self.processes.setdefault(host, {})[index] = ()
                self.faults.setdefault(host, {})[index] = {"mem_used_mib": 20480}
        return self.signal_answer

    async def holders(self, host: str, index: int) -> HostAnswer:
        if index == 1:
            raise RuntimeError("the scripted holders of GPU 1 fail")
        return HostAnswer(True, value={"device": "/dev/nvidia0", "holders": HOLDERS, "notes": []})


def _chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    i18n.reset()


def _english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    i18n.reset()


def _problem_hosts() -> ScriptedHosts:
    """node1: gpu0 20 GiB held by no process, two warnings and an application Xid
    (used last, for four reasons); gpu2 a sustained HW slowdown (never used)."""
    hosts = ScriptedHosts({HOST: 4})
    hosts.faults[HOST] = {
        0: {"mem_used_mib": 20480, "throttle": ("hw_thermal", "hw_power_brake")},
        2: {"throttle": ("hw_slowdown",)},
    }
    xid = Event(time=time.time(), kind="xid", gpu_uuid=hosts.uuid(HOST, 0), gpu_index=0, xid=13)
    hosts.events[HOST] = (xid,)
    return hosts


def _gpus(th: ThreadedHead, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert verbs.main(["--socket", str(th.sock), "gpus", *args]) == 0
    out: str = capsys.readouterr().out
    return out


def test_several_problems_and_a_health_title_in_chinese_the_english_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    parts = [
        "20.0 GiB held by no process",
        "Xid 13 (application)",
        "HW thermal slowdown",
        "HW power brake",
    ]
    with (
        ThreadedHead(tmp_path, {HOST: 4}, scripted=_problem_hosts(), health=QUICK) as th,
        LineClient(th.sock) as c,
    ):

        def why() -> dict[str, str]:
            return {f"{g['host']}:{g['index']}": g["why"] for g in c.ok("gpus")["gpus"]}

        poll(lambda: all(p in why()["node1:0"] for p in parts), what="gpu0's four problems")
        ident = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": ident})["job"]["state"] == "running", what="job")
        english = why()
        # The English line as the head wrote it when its words nested one level: the
        # problems joined by "; ", then " (used last)".
        assert sorted(english["node1:0"].removesuffix(" (used last)").split("; ")) == sorted(parts)
        assert english["node1:0"].endswith(" (used last)")
        assert english["node1:2"] == "HW slowdown in 1 of the last 1 minutes"
        _english(monkeypatch)
        json_en = _gpus(th, capsys, "--json")
        assert verbs.main(["--socket", str(th.sock), "explain", str(ident)]) == 0
        explain_en = capsys.readouterr().out
        _chinese(monkeypatch)
        try:
            table = _gpus(th, capsys)
            json_zh = _gpus(th, capsys, "--json")
            assert verbs.main(["--socket", str(th.sock), "explain", str(ident)]) == 0
            explain_zh = capsys.readouterr().out
        finally:
            i18n.reset()
    assert json_zh == json_en  # --json: the same bytes in both languages
    assert {f"{r['host']}:{r['index']}": r["why"] for r in json.loads(json_en)["gpus"]} == english
    assert f"gpu0 on node1 passed over: {english['node1:0']}" in explain_en
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert "（最后使用）" in rows["node1:0"] and "20.0 GiB 被占用但没有进程" in rows["node1:0"]
    assert "Xid 13" in rows["node1:0"]
    said = [line for line in explain_zh.splitlines() if "gpu0 " in line or "gpu2 " in line]
    assert len(said) == 2, explain_zh
    for text in (rows["node1:0"], rows["node1:2"], *said):
        assert english_words(text, {*DATA, "gpu0", "gpu2", "gpu"}) == [], text


def _force_free(c: LineClient, gpu: int, rid: str) -> dict[str, Any]:
    args = {"host": HOST, "gpu": str(gpu), "reason": "stuck card"}
    return c.ask("force_free", args, rid=rid)


def test_force_frees_nested_lines_in_chinese_the_english_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts = Hosts({HOST: 2})
    hosts.faults[HOST] = {1: {"mem_used_mib": 20480}}
    with ThreadedHead(tmp_path, {HOST: 2}, scripted=hosts) as th, LineClient(th.sock, 60) as c:
        assert th.head is not None
        th.head.force_frees.memory_wait_s = 0.5
        th.head.force_frees.grace_s = lambda: 2.0
        ident = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": ident})["job"]["state"] == "running", what="job")
        c.ok("kill", {"job_id": ident})
        assert c.ok("show", {"job_id": ident})["job"]["state"] == "killing"
        th.in_loop(lambda: hosts.put_processes(HOST, 0, STRAYS))

        def seen() -> bool:
            assert th.head is not None
            got = th.head.watch.samples().get(HOST)
            return got is not None and len(got[1].gpus[0].processes) == 2

        poll(seen, what="the strays in a sample")
        answer = _force_free(c, 0, "words-0")
        assert answer.get("ok"), answer
        steps = {s["step"]: s for s in answer["result"]["steps"]}
        stop = f"job {ident} not killed: job {ident} is already being killed"
        assert steps["stop"]["outcome"] == f"2 other processes to signal; {stop}"
        lines = [f"pid {5000 + i} alice python train.py [/dev/nvidia0]" for i in range(12)]
        lines[0] += " (the helper)"
        assert steps["holders"]["outcome"] == (
            "12 process(es) hold /dev/nvidia0 or the shared files: " + "; ".join(lines)
        )
        audited = [row[0] for row in th.rows("SELECT outcome FROM audit ORDER BY id")]
        assert f"stop: {steps['stop']['outcome']}" in audited  # the audit keeps English
        failed = _force_free(c, 1, "words-1")
        assert refusal(failed) == (
            "internal",
            "force-free node1:1: internal error after the steps drain, stop, sigterm, sigkill,"
            " memory",
        )
        _chinese(monkeypatch)
        try:
            shown = {code: forcefree.step_line(step) for code, step in steps.items()}
            code = verbs.main(
                ["--socket", str(th.sock), "force-free", "node1:1", "--reason", "stuck again"]
            )
            err = capsys.readouterr().err
        finally:
            i18n.reset()
    assert code == 1
    for step in ("stop", "sigterm", "holders"):
        assert english_words(shown[step], {*DATA, str(ident)}) == [], shown[step]
    assert f"作业 {ident} 已在被终止" in shown["stop"], shown["stop"]
    assert "另有 5 项" in shown["holders"], shown["holders"]
    assert english_words(err, DATA) == [], err
    assert "内部错误" in err, err
