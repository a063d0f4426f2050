# ruff: noqa: RUF001 (the Chinese lines asserted on use fullwidth punctuation)
"""``gputui health`` and ``gputui incident`` in Chinese, on a simulated host whose helper
runs for real (a card fell off the bus: Xid 79).

Their lines, refusals included, show no English but the host's name, the flags and
what the health checks word (the finding's title, meaning and action, the Xid table:
the health catalogue's); the problems table keeps its columns in line at 80 and 200
columns; ``--json`` is the same in English and Chinese (``incident``'s readings are
taken anew each run: its other entries and notes are compared).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import ROOT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from columns import assert_in_line, titles_of
from untranslated import WORD, english_words

from gputui.common.text import cells

HOSTS = "hosts:\n  - name: a\n    local: true\n    sim: 2xa100-80gb,fault=xid:79@1\n"


def gputui(tmp_path: Path, lang: str, *args: str, columns: int = 200) -> tuple[int, str, str]:
    config = tmp_path / "hosts.yaml"
    config.write_text(HOSTS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    env.update(LANG="zh_CN.UTF-8" if lang == "zh" else "en_US.UTF-8", COLUMNS=str(columns))
    done = subprocess.run(
        [sys.executable, "-m", "gputui.entry", "--hosts", str(config), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def checks_words(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What the health checks and the Xid table word (the health catalogue's, not the
    CLI's), as ``health --json`` and ``incident --json`` carry them."""
    tmp = tmp_path_factory.mktemp("words")
    _, out, _ = gputui(tmp, "en", "health", "--json")
    words: set[str] = {"a"}
    for p in json.loads(out)["problems"]:
        for key in ("title", "meaning", "action"):
            words |= set(WORD.findall(p[key]))
    _, out, _ = gputui(tmp, "en", "incident", "a", "--since", "2d", "--json")
    for e in json.loads(out)["entries"]:
        if e["kind"] == "xid":
            words |= set(WORD.findall(e["text"]))
    return words - {"CRIT", "WARN", "INFO"}


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize(
    "args",
    [("health",), ("incident", "a", "--since", "2d"), ("incident", "a:1")],
    ids=" ".join,
)
def test_health_and_incident_read_in_chinese(
    tmp_path: Path, checks_words: set[str], args: tuple[str, ...], columns: int
) -> None:
    code, out, err = gputui(tmp_path, "zh", *args, columns=columns)
    assert code == (2 if args[0] == "health" else 0), err
    assert english_words(out + err, checks_words | {"ok", "kernel-log"}) == []
    assert all(cells(line) <= columns for line in out.splitlines())
    if args[0] == "health":
        assert "1 台主机上：1 个严重，0 个警告，0 条提示" in out
        table = out.split("\n\n")[0].splitlines()
        assert titles_of(table[0])[:3] == ["级别", "主机", "GPU"]
        assert_in_line(table, columns)
    else:
        assert out.startswith("a ") and "的事件时间线，自 " in out
        assert "注：hosts.yaml 中没有调度主节点：没有审计记录" in out
        assert "  问题  " in out and "  采样  " in out
        window_s = 2 * 86400 if "--since" in args else 86400  # the default: a day
        if time.clock_gettime(time.CLOCK_BOOTTIME) < window_s - 60:
            assert "  启动  " in out  # this machine booted within the window


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("incident", "b"), "'b'：hosts.yaml 中没有这台主机"),
        (("incident", "a:x"), "'a:x'：GPU 必须是 0-63 的编号（HOST:GPU）"),
        (("incident", "a", "--since", "yesterday"), "--since：不是时长：'yesterday'"),
        (("health", "--wait", "0"), "--wait 必须在 0 到 3600 秒之间"),
        (("incident", "a", "--wait", "99999"), "--wait 必须在 0 到 3600 秒之间"),
        (("health", "--host", "zz"), "--host 'zz'：没有这台主机（主机：a）"),
        (("health", "--ack", "k"), "--ack KEY 需要 --note TEXT"),
        (
            ("health", "--ack", "k", "--note", "fan"),
            "--ack 需要调度主节点（hosts.yaml 中没有 head:）",
        ),
    ],
    ids=str,
)
def test_their_refusals_are_one_chinese_line(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    code, out, err = gputui(tmp_path, "zh", *args)
    assert (code, out) == (3, "")
    assert err.count("\n") == 1 and said in err, err
    given = set(WORD.findall(" ".join(args))) | {"KEY", "TEXT", "HOST", "head", "note"}
    assert english_words(err, given) == []


def test_their_json_is_the_same_in_both_languages(tmp_path: Path) -> None:
    said = {lang: gputui(tmp_path, lang, "health", "--json")[1] for lang in ("en", "zh")}
    assert said["en"] == said["zh"] and json.loads(said["en"])["problems"]

    def kept(out: str) -> str:
        report = json.loads(out)
        report["entries"] = [e for e in report["entries"] if e["kind"] != "sample"]
        del report["since"]  # 24 hours before each run
        return json.dumps(report)

    args = ("incident", "a:1", "--json")
    said = {lang: kept(gputui(tmp_path, lang, *args)[1]) for lang in ("en", "zh")}
    assert said["en"] == said["zh"]
    assert not re.search(r"[\u4e00-\u9fff]", said["zh"])
