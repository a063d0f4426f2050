"""What the head answers a job action (``told``: what happens next) and what
``explain`` says of a waiting job reach a Chinese user in Chinese: the head sends its
English line with the template and args beside it (``told_words``, the estimate's
``why_words``), and the CLI shows the template from its own catalogue. A real head
(real SQLite file, real socket), a real Unix user, the CLI run as that user in a
process of its own under ``LANG=zh_CN.UTF-8`` and under English: in English every
line is what the head wrote, as before; ``explain --json`` is byte for byte the same
in both languages."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import ThreadedHead, poll
from realusers import User, made_users
from test_head_words_cli import CHINESE, ENGLISH, HOST, _cli, gputui

from gputui.common import i18n

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words  # isort: skip  (tests/i18n, put on sys.path above)

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

pytestmark = pytest.mark.root


@pytest.fixture
def th() -> Iterator[ThreadedHead]:
    """A head the test user can reach (a 0755 directory under /tmp), one host of 4 GPUs."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-told-", dir="/tmp"))
    tmp.chmod(0o755)
    with ThreadedHead(tmp, {HOST: 4}) as head:
        head.sock.chmod(0o777)
        yield head
        assert head.problems == []


@pytest.fixture
def user() -> Iterator[User]:
    with made_users(1, prefix="gta") as (made,):
        yield made


def _submit(th: ThreadedHead, user: User, name: str) -> int:
    code, out, err = gputui(
        user, th.sock, ENGLISH, "submit", "-g", "4", "--name", name, "--", "true"
    )
    assert code == 0, err
    return int(out)


def test_job_actions_say_what_happens_next_in_chinese(th: ThreadedHead, user: User) -> None:
    first = _submit(th, user, "first")
    hosts = th.hosts
    assert hosts is not None
    poll(lambda: hosts.launches, what="the first job's launch")
    waiting = _submit(th, user, "second")  # all 4 GPUs are the first's: it waits
    # (verb, job, in English, in Chinese): each done once, in one language or the other
    steps = [
        ("hold", waiting, None, "已挂起：release-hold 之前不会开始"),
        ("release-hold", waiting, "back in the queue", None),
        ("hold", waiting, "held: it does not start until release-hold", None),
        ("release-hold", waiting, None, "已回到队列"),
        ("cancel", waiting, None, "在运行前已取消"),
        ("kill", first, None, "现在发送 SIGTERM，宽限期后发送 SIGKILL，以已杀死结束"),
    ]
    for verb, job, english, chinese in steps:
        lang = ENGLISH if english is not None else CHINESE
        code, out, err = gputui(user, th.sock, lang, verb, str(job))
        assert code == 0, err
        assert len(out.splitlines()) == 1, out
        if english is not None:
            assert out.startswith(f"job {job}: ") and out.endswith(f": {english}\n"), out
        else:
            assert out.startswith(f"作业 {job}：") and out.endswith(f"：{chinese}\n"), out
            assert english_words(out, {"release-hold"}) == [], out


def test_explain_of_a_waiting_job_reads_in_chinese_and_its_json_is_the_same(
    th: ThreadedHead, user: User
) -> None:
    _submit(th, user, "first")
    hosts = th.hosts
    assert hosts is not None
    poll(lambda: hosts.launches, what="the first job's launch")
    waiting = _submit(th, user, "second")
    code, zh, err = gputui(user, th.sock, CHINESE, "explain", str(waiting))
    assert code == 0, err
    classes = {"urgent", "normal", "low", "night"}  # the config's class names: data
    allowed = {*english_words(user.name), *english_words(HOST), "second", *classes}
    assert english_words(zh, allowed) == [], zh
    assert f"作业 {waiting}（second）" in zh and "预计开始" in zh
    code, en, err = gputui(user, th.sock, ENGLISH, "explain", str(waiting))
    assert code == 0, err
    assert f"job {waiting} (second) of {user.name}: queued" in en
    assert "estimated start: " in en and "fair share     " in en
    en_json, zh_json = (
        gputui(user, th.sock, lang, "explain", "--json", str(waiting))
        for lang in (ENGLISH, CHINESE)
    )
    assert en_json[0] == 0 and en_json[1] == zh_json[1]


def _as_root(monkeypatch: pytest.MonkeyPatch, sock: Path, lang: str, *argv: str) -> str:
    """``gputui ARGV`` as root (an admin), in this process, in ``lang``."""
    monkeypatch.setenv("LANG", lang)
    code, out, err = _cli(str(sock), list(argv))
    assert code == 0, err
    return out.splitlines()[0]


def test_drain_and_undrain_say_what_was_done_in_chinese(
    th: ThreadedHead, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    card = f"{HOST}:1"
    steps = [
        (ENGLISH, ("drain", card, "--reason", "fan"), f"{card}: drained"),
        (CHINESE, ("drain", card, "--reason", "fan"), f"{card}: 已由 root 排空；原因已更新"),
        (ENGLISH, ("drain", card, "--reason", "fan"), f"{card}: already drained by root;"),
        (CHINESE, ("undrain", card, "--reason", "ok"), f"{card}: 已取消排空"),
        (CHINESE, ("drain", card, "--reason", "fan"), f"{card}: 已排空"),
        (ENGLISH, ("undrain", card, "--reason", "ok"), f"{card}: undrained"),
    ]
    for lang, argv, said in steps:
        line = _as_root(monkeypatch, th.sock, lang, *argv)
        assert line.startswith(said), line
        if lang == CHINESE:
            assert english_words(line, {"gpu", "root"}) == [], line
    i18n.reset()
