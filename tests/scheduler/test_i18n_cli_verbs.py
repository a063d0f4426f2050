"""The claim, booking, notice, history and notify verbs in Simplified Chinese against
a real head: every line a person reads is Chinese but the names in it (host, user,
card, job, URL); their refusals of bad input too; ``--json`` the same bytes in both
languages."""

# ruff: noqa: RUF001 (the Chinese a user reads, its full-width marks included)
from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chatserver import ChatServer
from headthread import ThreadedHead
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import WORD, english_words

from gputui import entry
from gputui.common import i18n
from gputui.config.notify import NotifyConfig

TOKEN = "zhTOKEN01234567"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
def th(tmp_path: Path, chat: ChatServer) -> Iterator[ThreadedHead]:
    config = NotifyConfig(backoff_s=0.05, timeout_s=2.0, user_private=True)
    with ThreadedHead(tmp_path, {"gpu01": 2}, notify=config) as head:
        yield head
        assert head.problems == []


class Verbs:
    """``gputui --socket SOCK VERB …`` in this process, in a language."""

    def __init__(self, th: ThreadedHead, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.th, self.capsys, self.monkeypatch = th, capsys, monkeypatch

    def speak(self, lang: str) -> None:
        for name in ("LC_ALL", "LC_MESSAGES"):
            self.monkeypatch.delenv(name, raising=False)
        self.monkeypatch.setenv("LANG", lang)
        self.monkeypatch.setenv("COLUMNS", "200")
        i18n.reset()

    def __call__(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        self.monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            code = entry.main(["--socket", str(self.th.sock), *argv])
        except SystemExit as done:  # argparse's usage errors
            code = int(done.code or 0)
        said = self.capsys.readouterr()
        return code, said.out, said.err


@pytest.fixture
def gputui(
    th: ThreadedHead, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Verbs]:
    verbs = Verbs(th, capsys, monkeypatch)
    verbs.speak("zh_CN.UTF-8")
    yield verbs
    i18n.reset()


def _names(*texts: str) -> set[str]:
    """The words of the test's own data (host, user, card, job names)."""
    return {word for text in texts for word in WORD.findall(text)}


def test_claims_bookings_and_who_you_are_read_in_chinese(
    gputui: Verbs, th: ThreadedHead, chat: ChatServer
) -> None:
    me = json.loads(gputui("whoami", "--json")[1])
    data = _names("gpu01", me["user"], *me["groups"], th.hosts.uuid("gpu01", 0) if th.hosts else "")
    data |= {"eval", "gputui", "env", "book", "bookings", "uid", "mine"}  # commands; uid; a note
    seen: list[str] = []

    def read(*argv: str, code: int = 0) -> str:
        got, out, err = gputui(*argv)
        assert got == code, (argv, out, err)
        seen.append(out + err)
        assert english_words(out + err, data) == [], (argv, out + err)
        return out + err

    assert "组" in read("whoami")
    assert "没有未读通知" in read("notices")
    claimed = read("claim", "gpu01:0", "--note", "mine")
    assert claimed.startswith("认领 c1：") and "使用方法：" in claimed
    assert read("release", "c1") == f"已释放 c1（{th.hosts.uuid('gpu01', 0)}）\n"  # type: ignore[union-attr]
    assert read("release", "--all") == "没有可释放的\n"
    assert "你在 gpu01 上没有生效的认领" in read("env", "--host", "gpu01", code=1)
    booked = read("book", "-g", "1", "--from", "+1h", "--for", "2h", "--note", "mine")
    assert booked.startswith("预约 b1：gpu01 上 1 块 GPU，") and "月" in booked
    board = read("bookings")
    assert board.split()[:3] == ["预约", "用户", "状态"] and "已预约" in board
    assert read("unbook", "b1") == "已取消预约 b1\n"
    assert read("bookings") == "没有未来的预约（用 gputui book 预约）\n"
    assert "已取消" in read("bookings", "--all")
    assert "结束的作业" in read("history") and "没有已结束的作业" in seen[-1]
    assert "没有状态为 失败, 超时 的已结束作业" in read("history", "--state", "F,TO")


def test_notify_reads_in_chinese(gputui: Verbs, chat: ChatServer) -> None:
    url = f"{chat.base}/open-apis/bot/v2/hook/{TOKEN}"
    data = _names(chat.base, "/open-apis/bot/v2/hook/zhTO", "lab", "end,fail", "feishu", "HTTP")
    data |= {"gputui", "notify", "test", "set", "URL", "apprise", "webhook"}
    code, out, err = gputui("notify", "show")
    assert (code, err) == (0, "") and out.startswith("没有渠道：")
    assert "调度主节点的发件箱：0 条待发" in out and english_words(out, data) == []
    code, out, err = gputui(
        "notify", "set", "-", "--secret", "-", "--events", "fail,end", "--name", "lab",
        stdin=f"{url}\nsekrit\n",
    )  # fmt: skip
    assert (
        (code, err) == (0, "") and "，已签名" in out and "发送测试消息：gputui notify test" in out
    )
    assert english_words(out, data) == []
    code, out, _err = gputui("notify", "show")
    assert code == 0 and "自 " in out and english_words(out, data) == []
    code, out, _err = gputui("notify", "test")
    assert (code, out.startswith("已发送：lab")) == (0, True)
    chat.mode = "down"
    code, out, _err = gputui("notify", "test")
    assert code == 1 and out.startswith("未发送：lab")  # what follows is the chat's own answer
    assert gputui("notify", "clear")[:2] == (0, "已清除：lab\n")
    assert gputui("notify", "clear")[:2] == (0, "已清除：无（没有渠道）\n")


FLAGS = _names(
    "gputui history audit book run --since --until --state --limit --user --all-users --from"
)
"""The verbs and flags a refusal names."""

REFUSED = [
    (("history", "--state", "nearly"), "--state：'nearly' 不是"),
    (("history", "--limit", "lots"), "--limit：不是数字"),
    (("history", "--limit", "0"), "--limit：应为 1 到 10000，而不是 0"),
    (("history", "--user", "root", "-a"), "--user 与 --all-users 只能给出其一"),
    (("history", "--since", "yesterday"), "--since：不是日期"),
    (("history", "--since", "9999-01-01"), "--since：'9999-01-01' 超出范围"),
    (("history", "--since", "2026-01-01", "--until", "2025-01-01"), "不在 --since"),
    (("history", "--since", "2020-01-01", "--until", "2026-01-01"), "跨度超过 366 天"),
    (("audit", "--since", "lastweek"), "--since：不是日期"),
    (("book", "-g", "1", "--from", "someday", "--for", "2h"), "--from：不是时间"),
    (("run",), "请在 -- 之后给出命令"),
]


@pytest.mark.parametrize(("argv", "wanted"), REFUSED, ids=" ".join)
def test_bad_input_is_one_chinese_line(gputui: Verbs, argv: tuple[str, ...], wanted: str) -> None:
    code, out, err = gputui(*argv)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"gputui {argv[0]}: ") and wanted in err, err
    typed = FLAGS | _names(*argv) | {"YYYY-MM-DD", "now", "mon", "tomorrow", "completed"}
    typed |= {"failed", "timeout", "killed", "cancelled", "CD", "TO", "CA"}
    assert english_words(err, typed) == [], err


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20))
def test_any_bad_date_or_state_is_refused_in_chinese(gputui: Verbs, text: str) -> None:
    for option in ("--since", "--state", "--limit"):
        code, _out, err = gputui("history", f"{option}={text}")
        if code == 0:
            continue
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        allowed = FLAGS | _names(text) | {"YYYY-MM-DD", "completed", "failed", "timeout"}
        assert english_words(err, allowed | {"killed", "cancelled", "CD", "TO", "CA"}) == [], err


def test_json_is_the_same_bytes_in_chinese_and_english(gputui: Verbs) -> None:
    gputui("claim", "gpu01:1", "--note", "mine")
    gputui("book", "-g", "1", "--from", "+3h", "--for", "2h", "--note", "later")
    machine = (
        ("bookings", "--json"),
        ("bookings", "--all", "--json"),
        ("whoami", "--json"),
        ("notices", "--all", "--json"),
        ("history", "--since", "2026-01-01", "--until", "2026-02-01", "--json"),
        ("notify", "show", "--json"),
    )
    gputui("notices", "--all", "--json")  # reading them marks them read: once first
    said = {}
    for lang in ("en_US.UTF-8", "zh_CN.UTF-8"):
        gputui.speak(lang)
        said[lang] = [gputui(*argv) for argv in machine]
    for argv, english, chinese in zip(
        machine, said["en_US.UTF-8"], said["zh_CN.UTF-8"], strict=True
    ):
        assert english == chinese, argv
        assert english[0] == 0 and english[1].strip()[:1] in "[{", argv
