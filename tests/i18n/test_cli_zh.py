# ruff: noqa: RUF001, RUF002 (the Chinese lines asserted on use fullwidth punctuation)
"""The scheduler verbs in Chinese (``LANG=zh_CN.UTF-8``), against a real head.

Every verb's lines, its refusals and errors included, show no English but the test's
own data (host, user, job names, commands, flags) and what the head itself words
(its refusals and told lines: the head's own catalogue); the weekly report reads in
Chinese; the tables keep their columns in line, by display cells, at 80 and 200
columns with Chinese titles and Chinese data; and ``--json`` and ``--csv`` are the
same bytes in English and in Chinese.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from columns import assert_in_line, titles_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from untranslated import WORD, english_words

from gputui.cli import verbs
from gputui.common import i18n
from gputui.common.i18n import _
from gputui.common.text import cells

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headthread import LineClient, ThreadedHead, poll

DATA = frozenset(
    {"gpu", "gpu01", "root", "train", "sleep", "fan", "true", "hello", "from", "the", "job"}
    | {"normal", "EUR", "nosuchuser", "GPU-gpu", "scheduler.quotas", "format"}
    | {"user", "group", "project", "pool"}
)
"""The test's own data: the host, user, job names, commands, the priority class and
currency of the head's defaults, the job's output and its GPUs' UUIDs (the scripted
host's), config keys and flags (``--format``, ``--by``'s values)."""


def flags_of(argv: list[str]) -> set[str]:
    """What a line may quote of the command line: the verb, its flags and values."""
    words = set(argv)
    for arg in argv:
        words |= set(arg.lstrip("-").split("-")) | {arg.lstrip("-")}
    return words


def language(lang: str) -> None:
    """Switch the process to ``lang`` the way a user does: the environment."""
    os.environ["LANG"] = "zh_CN.UTF-8" if lang == "zh" else "en_US.UTF-8"
    os.environ.pop("LC_ALL", None)
    os.environ.pop("LC_MESSAGES", None)
    i18n.reset()


def gputui(sock: Path, *argv: str, columns: int = 200) -> tuple[int, str, str]:
    """``gputui --socket SOCK ARGV`` in this process: (exit code, stdout, stderr)."""
    os.environ["COLUMNS"] = str(columns)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = verbs.main(["--socket", str(sock), *argv])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadedHead, list[str]]]:
    """A head with one running job (``train``, named in Chinese too: ``训练``), two that
    wait, and one held."""
    saved = {k: os.environ.get(k) for k in ("LANG", "LC_ALL", "LC_MESSAGES", "COLUMNS")}
    with ThreadedHead(tmp_path_factory.mktemp("zh"), {"gpu01": 2}) as th:
        language("en")
        ids = []
        for argv in (
            ["submit", "-g", "1", "--name", "train", "--", "sleep", "60"],
            ["submit", "-g", "2", "--name", "训练", "--", "sleep", "60"],
            ["submit", "-g", "1", "--", "sleep", "60"],
            ["submit", "-g", "1", "--", "sleep", "60"],
        ):
            code, out, err = gputui(th.sock, *argv)
            assert code == 0, err
            ids.append(out.strip())
        with LineClient(th.sock) as client:
            client.ok("hold", {"job_id": int(ids[3])})
            poll(
                lambda: client.ok("show", {"job_id": int(ids[0])})["job"]["state"] == "running",
                what="the first job to run",
            )
        yield th, ids
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    i18n.reset()


def told_by_the_head(text: str) -> str:
    """``text`` without what the head words (after the last ``：`` of each line of a
    job's action, ``作业 3：挂起：held: …``): the head's own catalogue translates that."""
    return "\n".join(
        line.split("：")[0] + "：" + line.split("：")[1] if line.count("：") >= 2 else line
        for line in text.splitlines()
    )


VERBS = [
    ["queue"],
    ["queue", "--all"],
    ["queue", "-o", "%.8i %j %T %M %l %R %P %V %S %h %Q %t %b %D %u"],
    ["show", "{0}"],
    ["show", "{1}"],
    ["show", "{3}"],
    ["logs", "{0}"],
    ["gpus"],
    ["gpus", "--free"],
    ["usage"],
    ["usage", "--daily", "--by", "group"],
    ["report", "--week"],
    ["quota"],
]


@pytest.mark.parametrize("argv", VERBS, ids=" ".join)
@pytest.mark.parametrize("columns", [80, 200])
def test_every_verb_reads_in_chinese(
    head: tuple[ThreadedHead, list[str]], argv: list[str], columns: int
) -> None:
    th, ids = head
    argv = [a.format(*ids) for a in argv]
    language("zh")
    code, out, err = gputui(th.sock, *argv, columns=columns)
    assert code == 0, err
    assert out.strip()
    here = set(WORD.findall(os.getcwd()))  # show's working directory
    assert english_words(out + err, DATA | flags_of(argv) | here) == []
    if argv[0] != "show" and "-o" not in argv:  # as long as they are (as squeue -o)
        assert [line for line in out.splitlines() if cells(line) > columns] == []


def test_the_weekly_report_is_in_chinese(head: tuple[ThreadedHead, list[str]]) -> None:
    th, _ids = head
    language("zh")
    code, out, _err = gputui(th.sock, "report", "--week")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("**GPU 报告，") and "（7 天）" in lines[0]
    for part in (
        "- GPU时：已分配",
        "- 利用率",
        "- 已分配但空闲",
        "- 能耗：",
        "- 用量最多的用户",
        "- 下周预约",
    ):
        assert any(line.startswith(part) for line in lines), part


def test_a_jobs_actions_and_its_end_read_in_chinese(head: tuple[ThreadedHead, list[str]]) -> None:
    """``hold``, ``release-hold``, ``cancel`` say one line a job, ``wait`` the end: ours in
    Chinese (the head's told text after it is the head's catalogue's)."""
    th, ids = head
    language("zh")
    for verb, state in (("hold", "挂起"), ("release-hold", "排队中")):
        code, out, _err = gputui(th.sock, verb, ids[2])
        assert code == 0
        assert out.startswith(f"作业 {ids[2]}：{state}")
        assert english_words(told_by_the_head(out), DATA) == []
    code, out, err = gputui(th.sock, "drain", "gpu01:1", "--reason", "fan")
    assert code == 0, err
    assert "已被 root 排空" in out
    code, out, _err = gputui(th.sock, "queue")
    assert "不可用：1 块 GPU 不接受新工作" in out and "已被 root 排空" in out
    assert english_words(out, DATA) == []
    code, out, err = gputui(th.sock, "undrain", "gpu01:1", "--reason", "fan")
    assert code == 0, err


REFUSALS = [
    (["queue", "--json", "-o", "%i"], "请给出 --json 或 --format"),
    (["queue", "-o", "%z"], "未知字段 %z"),
    (["queue", "-o", "%"], "后面必须跟字段字母"),
    (["queue", "-o", "%500i"], "超过 200"),
    (["queue", "-o", "plain"], "其中没有字段"),
    (["queue", "--user", "nosuchuser"], "没有此用户：nosuchuser"),
    (["usage", "--csv", "--json"], "请给出 --csv 或 --json"),
    (["usage", "--by", "fan"], "不是 user, group, project, pool 之一"),
    (["submit", "--after", "1", "--after-ok", "1", "--", "true"], "请给出 --after 或 --after-ok"),
]


@pytest.mark.parametrize(("argv", "said"), REFUSALS, ids=str)
def test_refusals_are_one_chinese_line(
    head: tuple[ThreadedHead, list[str]], argv: list[str], said: str
) -> None:
    th, _ids = head
    language("zh")
    code, out, err = gputui(th.sock, *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and said in err
    assert english_words(err, DATA | flags_of(argv) | {"bDhijlMPQRSTtuV"}) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.sampled_from("%.0123456789ijuTtMlDbRPQVShzZ_ -"), min_size=1, max_size=12))
def test_any_format_is_a_table_or_one_chinese_line(spec: str) -> None:
    """``-o FORMAT``: whatever is given, its header or its refusal is in Chinese."""
    from gputui.cli import qformat

    language("zh")
    given_words = set(WORD.findall(spec)) | {"bDhijlMPQRSTtuV"}
    try:
        parts = qformat.parse(spec)
    except qformat.FormatError as exc:
        assert str(exc).startswith("--format：") and "\n" not in str(exc)
        assert english_words(str(exc), given_words | {"format"}) == []
        return
    titles = " ".join(_(qformat.FIELDS[p.letter][0]) for p in parts if p.letter)
    assert english_words(titles) == []
    assert qformat.lines(parts, [], time.time())[0].strip()


JSON = [
    ["queue", "--json"],
    ["queue", "--all", "--json"],
    ["show", "{0}", "--json"],
    ["gpus", "--json"],
    ["gpus", "--free", "--json"],
    ["claims", "--all", "--json"],
    ["usage", "--since", "2026-01-01", "--until", "2026-01-31", "--json"],
    ["usage", "--since", "2026-01-01", "--until", "2026-01-31", "--csv"],
    ["usage", "--since", "2026-01-01", "--until", "2026-01-31", "--csv", "--daily"],
    ["report", "--week", "--json"],
]


@pytest.mark.parametrize("argv", JSON, ids=" ".join)
def test_json_and_csv_are_the_same_bytes_in_both_languages(
    head: tuple[ThreadedHead, list[str]], argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputui.cli import usage

    th, ids = head
    argv = [a.format(*ids) for a in argv]
    frozen = time.time() - 86400  # the report's week: the same for both runs, and
    # one that ended before these jobs ran (a running job's hours grow between runs)
    clock = types.SimpleNamespace(
        time=lambda: frozen, strftime=time.strftime, localtime=time.localtime
    )
    monkeypatch.setattr(usage, "time", clock)
    said = {}
    for lang in ("en", "zh"):
        language(lang)
        code, out, err = gputui(th.sock, *argv)
        assert code == 0, err
        said[lang] = out
    assert said["en"] == said["zh"] and said["en"].strip()


# -- the tables, fitted by display cells ---------------------------------------------


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tables_keep_their_columns_in_line(
    head: tuple[ThreadedHead, list[str]], width: int, lang: str
) -> None:
    th, _ids = head
    language(lang)
    for argv in (["queue", "--all"], ["gpus"], ["usage", "--by", "user"]):
        code, out, err = gputui(th.sock, *argv, columns=width)
        assert code == 0, err
        lines = out.splitlines()[1:] if argv[0] == "usage" else out.splitlines()
        table = lines[: lines.index("")] if "" in lines else lines
        notes = ("注：", "未知：", "note:", "not known:")  # usage's lines under its table
        assert_in_line([line for line in table if not line.startswith(notes)], width)


def _claims(n: int) -> list[dict[str, Any]]:
    now = time.time()
    return [
        {
            "id": i,
            "user": ["root", "张三", "李四"][i % 3],
            "state": ["active", "waiting", "released"][i % 3],
            "reason": "排队等待" if i % 3 == 1 else None,
            "gpus": 1,
            "gpu_uuids": ["GPU-1"] if i % 3 == 0 else [],
            "host": f"gpu0{i}",
            "granted_at": now - 600 * i,
            "expires_at": now + 3600,
            "note": "训练模型 " * (i % 4),
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("width", [80, 200])
def test_claims_audit_and_health_tables_line_up_with_chinese_data(width: int) -> None:
    from gputui.cli.tables import audit_table, claims_table

    language("zh")
    assert_in_line(claims_table(_claims(7), time.time(), width), width)
    rows = [
        {
            "time": time.time() - 60 * i,
            "user": ["root", "张三"][i % 2],
            "action": ["drain", "取消"][i % 2],
            "target": f"gpu01:{i}",
            "owner": "李四",
            "reason": "风扇故障" * i,
            "outcome": "完成",
        }
        for i in range(5)
    ]
    assert_in_line(audit_table(rows, width), width)


def test_the_alignment_check_sees_a_column_out_of_line() -> None:
    """The check above fails a table padded by characters instead of cells."""
    header = "名称" + " " * 6 + "主机" + " " * 3 + "状态"
    assert titles_of(header) == ["名称", "主机", "状态"]
    assert_in_line([header, "train" + " " * 5 + "gpu01" + "  " + "ok"], 80)
    assert_in_line([header, "训练模型" + " " * 2 + "gpu01" + "  " + "ok"], 80)
    with pytest.raises(AssertionError):  # 训练模型: 4 characters, 8 cells
        assert_in_line([header, "训练模型".ljust(10) + "gpu01" + "  " + "ok"], 80)
