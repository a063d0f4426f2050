# ruff: noqa: RUF001 (the Chinese lines asserted on use fullwidth punctuation)
"""More of the command line in Chinese: ``run``'s and ``attach``'s lines, ``quota``
with a quota over, the weekly report's quota line, ``head``'s own lines, the Slurm
backend's refusals, a capability a scheduler lacks, force-free's steps, the drained
and fenced cards, the themes' refusals. Each shows no English but the test's data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from columns import assert_in_line
from test_cli_zh import DATA, flags_of, gputui, language
from untranslated import WORD, english_words

from gputui.cli import attach, forcefree, head, tables, themes
from gputui.cli.errors import UsageError
from gputui.config.models import Config
from gputui.config.scheduler import Quota, SchedulerConfig
from gputui.scheduler.client.backend import Unsupported
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.backend import SlurmBackend
from gputui.scheduler.client.slurm.runner import Runner
from gputui.scheduler.head.actions import Rules

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headthread import ThreadedHead


@pytest.fixture(autouse=True)
def chinese() -> None:
    language("zh")


def test_quota_over_and_the_report_line_in_chinese(tmp_path: Path) -> None:
    sched = SchedulerConfig(quotas=[Quota(group="root", gpu_hours_per_week=0.0001)])
    with ThreadedHead(tmp_path, {"gpu01": 2}, rules=Rules(sched=sched)) as th:
        argv = ["run", "-g", "1", "--host", "gpu01", "--", "true"]
        code, out, err = gputui(th.sock, *argv)
        assert code == 0, err
        assert english_words(out + err, DATA | flags_of(argv)) == []
        code, out, err = gputui(th.sock, "quota", columns=80)
        assert code == 0, err
        assert out.startswith("每周 GPU时 配额，本周自 ")
        assert out.splitlines()[1].split()[:6] == ["组", "资源池", "已用", "上限", "用量%", "状态"]
        assert_in_line(out.splitlines()[1:], 80)
        assert english_words(out, DATA) == []
        code, out, err = gputui(th.sock, "report")
        assert code == 0, err
        assert any(line.startswith("- 超出配额：") for line in out.splitlines())
        assert english_words(out, DATA) == []


def test_run_that_cannot_start_its_command_says_so_in_chinese(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th:
        argv = ["run", "-g", "1", "--host", "gpu01", "--", "/nonexistent/train"]
        code, out, err = gputui(th.sock, *argv)
    assert code == 1 and out == ""
    line = err.splitlines()[-1]
    assert line.startswith("gputui run: 无法运行 '/nonexistent/train'：")
    why = os.strerror(2)  # the system's own words
    given = DATA | flags_of(argv) | set(WORD.findall(argv[-1])) | set(WORD.findall(why))
    assert english_words(line, given) == []


@pytest.mark.parametrize("why", [None, "time", "idle"])
@pytest.mark.parametrize("exit_code", [0, 3, None])
def test_a_terminal_jobs_end_reads_in_chinese(why: str | None, exit_code: int | None) -> None:
    code, line = attach._ended(7, {"exit_code": exit_code, "signal": "TERM", "why": why})
    assert code == (exit_code if exit_code is not None else 128 + 15)
    assert line.startswith("作业 7 ")
    assert ("退出码" in line) == (exit_code is not None)
    assert english_words(line) == []


def test_head_backup_lines_in_chinese(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  - name: gpu01\n", encoding="utf-8")
    missing = tmp_path / "none.db"
    for argv, said in (
        (["--hosts", str(hosts), "--database", str(missing), "backup"], "请给出要写入的文件"),
        (["--hosts", str(hosts), "--database", str(missing), "backup", "x"], "处没有数据库"),
        (
            ["--hosts", str(hosts), "--database", "postgresql+psycopg://u@h/db", "backup", "x"],
            "数据库在 PostgreSQL 服务器上",
        ),
    ):
        assert head.main(argv) in (1, 2)
        err = capsys.readouterr().err
        assert said in err
        given = set(WORD.findall(" ".join(argv))) | {"head", "PATH", "PostgreSQL", "pg_dump"}
        assert english_words(err, given) == []
    with pytest.raises(SystemExit):
        head.main(["--help"])
    out = capsys.readouterr().out
    assert "调度守护进程" in out and "打印 systemd 单元文件后退出" in out


def _slurm() -> SlurmBackend:
    return SlurmBackend(Runner("local"), partitions={}, qos={}, nodes={})


@pytest.mark.parametrize(
    "ask",
    [
        lambda s: s.submit(argv=["train"], booking=3),
        lambda s: s.submit(argv=["train"], array="1-3"),
        lambda s: s.submit(argv=["train"], preemptible=True),
        lambda s: s.submit(argv=[]),
        lambda s: s.submit(argv=["train"], priority="urgent"),
        lambda s: s.submit(argv=["train"], mig="huge"),
        lambda s: s.submit(argv=["train"], pool="a b"),
        lambda s: s.claim(gpus=1, gpu_refs=["gpu01:0"]),
        lambda s: s.claim(gpus=1, model="A100"),
        lambda s: s.release(gpu_refs=["gpu01:0"]),
        lambda s: s.cancel(3, task=2),
        lambda s: s.drain("gpu01:1"),
        lambda s: s.force_free(host="gpu01", gpu="x", reason="stuck"),
        lambda s: s.usage(since=0, until=1, by="moon"),
    ],
)
def test_the_slurm_backends_refusals_are_chinese(ask: object) -> None:
    with pytest.raises(HeadError) as caught:
        ask(_slurm())  # type: ignore[operator]
    message = caught.value.message
    data = {"train", "urgent", "huge", "gpu", "gpu01", "moon", "drain", "sbatch", "srun"}
    allowed = data | {"submit", "claim", "release", "cancel", "force-free", "usage", "booking"}
    allowed |= {"array", "output", "env", "export", "conda", "venv", "image", "priority", "pool"}
    allowed |= {"reservation", "slurm.qos", "QOS", "GRES", "ARRAY_TASK", "mig", "group"}
    allowed |= {"project", "user", "by"}
    assert english_words(message, allowed) == [], message
    assert "\n" not in message


def test_a_capability_the_scheduler_lacks_is_one_chinese_line() -> None:
    line = Unsupported("slurm", "preempt").message
    assert line == "slurm 调度器无法抢占作业"
    assert english_words(Unsupported("slurm", "notify_set").message, {"slurm"}) == []


def test_force_free_steps_and_the_cards_that_take_no_work_in_chinese() -> None:
    assert forcefree.step_line({"step": "drain", "ok": True, "outcome": "done"}).split()[:2] == [
        "排空",
        "成功",
    ]
    assert "失败" in forcefree.step_line("not a step")
    gpus = [
        {"host": "gpu01", "index": 0, "fence": {"code": "xid-79", "reason": "Xid 79", "since": 1}},
        {"host": "gpu01", "index": 1, "drain": {"by": "root", "reason": "fan", "since": 1}},
        {"host": "gpu02", "index": 0, "host_drained": True},
        *({"host": "gpu03", "index": i, "state": "free"} for i in range(tables.MAX_SHOWN + 2)),
    ]
    lines = tables.unavailable_table(gpus, 100.0, 80)
    text = "\n".join(lines)
    assert "已隔离 xid-79" in text and "已被 root 排空" in text and "已排空（其主机）" in text
    assert lines[-1] == f"… 另有 {len(gpus) - tables.MAX_SHOWN} 个"
    assert english_words(text, DATA | {"xid", "Xid", "gpu02", "gpu03"}) == []


def test_the_themes_refusals_are_chinese() -> None:
    with pytest.raises(UsageError) as caught:
        themes.theme_for(Config(), "no-such-theme")
    assert str(caught.value).startswith("未知主题 'no-such-theme'；已有主题：")


@pytest.mark.parametrize("reason", ["Priority", "JobHeldAdmin", "Licenses", None])
@pytest.mark.parametrize("known", [True, False])
def test_explain_of_a_slurm_job_reads_in_chinese(reason: str | None, known: bool) -> None:
    """``gputui explain`` on Slurm: squeue's reason, sprio, sshare, the estimate."""
    from gputui.scheduler.client import explain_text

    now = 1_800_000_000.0
    body = {
        "scheduler": "slurm",
        "job": {"id": 5, "name": "train", "user": "root", "state": "PENDING"},
        "reason": reason,
        "priority": {"total": 9, "age": 1, "fair_share": 2, "job_size": 3, "partition": 1,
                     "qos": 2, "nice": 1} if known else None,
        "fair_share": {"fair_share": 0.5, "account": "lab", "raw_shares": "1",
                       "norm_shares": 0.25, "effective_usage": 0.1} if known else None,
        "fair_share_why": None if known else "sshare: no such user",
        "estimate": {"start": now + 3600, "nodes": "node1"} if known else {"start": None},
    }  # fmt: skip
    if known:
        body["job"]["time_limit_s"] = 7200
    lines = explain_text.slurm_lines(body, now)
    pairs = explain_text.slurm_pairs(body, now)
    text = "\n".join(lines + [value for _label, value in pairs])
    assert lines[0] == "root 的作业 5（train）：PENDING"
    when = set(WORD.findall(explain_text.when(now + 3600, now)))  # the head's explain's
    data = {"train", "root", "PENDING", "Licenses", "None", "lab", "node", "release-hold"}
    data |= {"Priority", "JobHeldAdmin", "QOS"}  # Slurm's own reason codes and terms
    data |= {"sprio", "sshare", "squeue", "start", "begin", "dependency", "nice"}
    assert english_words(text, data | when | {"no", "such", "user"}) == []


def test_head_check_wait_and_a_scripts_ignored_directive_in_chinese(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH --mail-type=ALL\nsleep 60\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th:
        assert head.check(th.sock) == 0
        out = capsys.readouterr().out
        assert out.startswith("gputui head --check: 健康（最近进展：")
        tasks = set(WORD.findall(out.partition("：")[2]))  # the head's tasks, by name
        assert english_words(out, tasks | {"head", "check"}) == []
        code, out, err = gputui(th.sock, "submit", "-g", "1", str(script))
        assert code == 0 and "gputui submit：警告：#SBATCH --mail-type 在这里没有意义" in err
        assert english_words(err, {"submit", "SBATCH", "mail-type", "ALL"}) == []
        job = out.strip()
        assert gputui(th.sock, "cancel", job)[0] == 0
        code, out, err = gputui(th.sock, "wait", job)
    assert code == 1 and out == ""
    assert err.startswith(f"作业 {job} 已取消")
    assert english_words(err.partition("：")[0]) == []  # after it: the head's reason
