# ruff: noqa: RUF001 (the Chinese lines asserted on use fullwidth punctuation)
"""``gputui demo`` in Chinese: its refusals (too many hosts, too few open files, an
OSError while starting), every line it prints before the console opens, and what
its head's seeding says (the intro's quick job, an idle claim, a problem), against
the demo's real head and simulated hosts. Each shows no English but the test's data."""

from __future__ import annotations

import errno
import io
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli_zh import language
from untranslated import WORD, english_words

from gputui.cli.console import main
from gputui.cli.demo import welcome_text
from gputui.common.text import cells
from gputui.demo.cluster import DemoCluster
from gputui.demo.limits import MAX_DEMO_HOSTS, fds_needed, start_error
from gputui.demo.progress import MANY, StartLines, export_line

DEADLINE_S = 90.0


@pytest.fixture(autouse=True)
def chinese() -> None:
    language("zh")


def words_of(*texts: str) -> set[str]:
    return {w for t in texts for w in WORD.findall(t)}


def test_too_many_hosts_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--hosts", str(MAX_DEMO_HOSTS + 1)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"gputui: --hosts {MAX_DEMO_HOSTS + 1} 超过演示的上限")
    assert english_words(err, {"hosts"}) == []


@pytest.mark.parametrize(("soft", "hard"), [(64, 64), (20, 20)])
def test_too_few_open_files_in_chinese(soft: int, hard: int) -> None:
    program = (
        "from gputui.cli.console import main\nraise SystemExit(main(['demo', '--hosts', '8']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
        env={**os.environ, "LANG": "zh_CN.UTF-8"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
    )
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"`ulimit -n {fds_needed(8)}`" in line and "需要" in line
    assert english_words(line, {"ulimit", "hosts"}) == []


@given(st.sampled_from([errno.EMFILE, errno.ENFILE, errno.EADDRINUSE, errno.EACCES]))
def test_a_start_that_failed_in_chinese(code: int) -> None:
    why = os.strerror(code)
    for exc in (OSError(code, why), OSError(code, why, "/srv/demo/sock")):
        line = start_error(exc, 12)
        assert line.startswith("演示无法启动")
        assert english_words(line, words_of(why, why.lower(), "/srv/demo/sock") | {"ulimit"}) == []


@pytest.mark.parametrize("hosts", [2, MANY + 4])
def test_the_start_lines_in_chinese_keep_their_columns(hosts: int) -> None:
    names = [f"gpu{i + 1:02d}" for i in range(hosts)]
    out = io.StringIO()
    report = StartLines(out, names)
    report("head", "starting", "")
    report("head", "ready", "位于 /tmp/x")
    for name in names:
        report(name, "connecting", "")
    for name in names:
        report(name, "ready", "4 个 GPU")
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["调度主节点", "启动中"]
    assert english_words("\n".join(lines), {"gpu", "tmp"}) == []
    # The state column starts at the same cell on every line.
    column = {cells(line[: line.index(line.split()[1])]) for line in lines}
    assert len(column) == 1, lines


def test_the_intro_in_chinese_fits_80_columns() -> None:
    export = export_line(Path("/tmp/gputui-demo-abcdefgh/head/head.sock"))
    text = welcome_text("您的作业 6（quick-test）约 20 秒后结束", export)
    assert all(cells(line) <= 78 for line in text.splitlines())
    # "shell" the translation keeps, as Chinese users say it
    allowed = words_of(export) | {"quick-test", "usage", "health", "audit", "claim", "shell"}
    assert english_words(text, allowed) == []


async def test_the_demo_start_and_its_seeding_in_chinese() -> None:
    out = io.StringIO()
    cluster = DemoCluster(hosts=1, gpus=2, head=True)
    try:
        report = StartLines(out, cluster.names)
        await cluster.start(report)
        directory = str(cluster.directory)
        assert await cluster.wait_ready(report, DEADLINE_S)
        done = await cluster.seed_head()
    finally:
        await cluster.stop()
    assert cluster.head is None or cluster.head.problems == []
    text = out.getvalue() + "\n".join(done)
    assert "就绪" in out.getvalue() and "个 GPU" in out.getvalue()
    assert any("quick-test" in line and "您的作业" in line for line in done), done
    assert any(line.startswith("您的认领") for line in done), done
    allowed = words_of(directory) | {"gpu", "quick-test"}
    assert english_words(text, allowed) == []
