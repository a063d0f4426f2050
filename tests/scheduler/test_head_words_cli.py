"""A refusal or a notice from a real head reaches a Chinese user's CLI in Chinese:
the head sends its English line with the template and args beside it, and the CLI
shows the template from its own catalogue. A real head (real SQLite file, real
socket), real Unix users (the head knows who asks only from SO_PEERCRED), the CLI
run as each in a process of its own under ``LANG=zh_CN.UTF-8`` and under English:
in English every line is exactly what the head wrote, as before; ``--json`` is
byte for byte the same in both languages."""

from __future__ import annotations

import contextlib
import grp
import io
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead, poll
from realusers import User, as_user, made_users

from gputui import entry
from gputui.common import i18n
from gputui.config.scheduler import Bookings, SchedulerConfig
from gputui.scheduler.head.actions import Rules, run_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words  # isort: skip  (tests/i18n, put on sys.path above)

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

pytestmark = pytest.mark.root

HOST = "gpu01"
ENGLISH, CHINESE = "en_US.UTF-8", "zh_CN.UTF-8"


def _cli(sock: str, argv: list[str]) -> tuple[int, str, str]:
    """``gputui ARGV`` in this (the user's) process, in the language $LANG names."""
    i18n.reset()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = entry.main(["--socket", sock, *argv])
    return code, out.getvalue(), err.getvalue()


def gputui(user: User, sock: Path, lang: str, *argv: str) -> tuple[int, str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(user.home), "LANG": lang}
    code, out, err = as_user(user, _cli, str(sock), list(argv), env=env).value
    return int(code), str(out), str(err)


@pytest.fixture
def th() -> Iterator[ThreadedHead]:
    """A head the test users can reach (a 0755 directory under /tmp); a group's
    bookings are limited to 1 GPU-hour a week (the quota a refusal names)."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-words-", dir="/tmp"))
    tmp.chmod(0o755)
    rules = Rules(sched=SchedulerConfig(bookings=Bookings(gpu_hours_per_week=1)))
    with ThreadedHead(tmp, {HOST: 4}, rules=rules) as head:
        head.sock.chmod(0o777)
        yield head
        assert head.problems == []


@pytest.fixture
def user() -> Iterator[User]:
    with made_users(1, prefix="gtw") as (made,):
        yield made


def test_refusals_are_chinese_for_a_chinese_user_and_as_before_in_english(
    th: ThreadedHead, user: User
) -> None:
    with LineClient(th.sock) as root:
        job = root.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
    group = grp.getgrgid(user.gid).gr_name
    cases = {
        # another user's job
        ("cancel", str(job)): (
            f"gputui cancel: job {job} belongs to root; only they or an admin may cancel it",
            f"gputui cancel: 作业 {job} 属于 root；只有其本人或管理员可以 cancel 它",
        ),
        # a pool that is not there
        ("submit", "--pool", "nope", "--", "true"): (
            "gputui submit: no pool named 'nope' (pools: a100)",
            "gputui submit: 没有名为 'nope' 的资源池（资源池：a100）",
        ),
        # a quota: the group's bookings a week
        ("book", "-g", "2", "--from", "+1d", "--for", "2h"): (
            f"gputui book: group {group} would book 4.0 GPU-hours in the week of ",
            f"gputui book: 组 {group} 在 ",
        ),
    }
    allowed = {
        "root",
        "cancel",
        "submit",
        "book",
        "nope",
        "a100",
        "bookings.gpu_hours_per_week",
        *english_words(group),  # a made name, of letters and digits
    }
    for argv, (english, chinese) in cases.items():
        en_code, en_out, en_err = gputui(user, th.sock, ENGLISH, *argv)
        zh_code, zh_out, zh_err = gputui(user, th.sock, CHINESE, *argv)
        assert en_code == zh_code == 1, (argv, en_err, zh_err)
        assert en_out == zh_out == ""
        assert en_err.startswith(english) and len(en_err.splitlines()) == 1, en_err
        assert zh_err.startswith(chinese) and len(zh_err.splitlines()) == 1, zh_err
        assert english_words(zh_err, allowed) == [], zh_err
    assert th.rows("SELECT state FROM job WHERE id = ?", job) != [("cancelled",)]


def test_a_notice_reads_in_chinese_and_notices_json_is_the_same_in_both(
    th: ThreadedHead, user: User
) -> None:
    code, out, err = gputui(user, th.sock, ENGLISH, "submit", "--name", "train", "--", "true")
    assert code == 0, err
    job = int(out)
    hosts = th.hosts
    assert hosts is not None
    poll(lambda: hosts.launches, what="the launch")
    th.in_loop(lambda: hosts.finish(HOST, run_key(job, 1), 3))
    poll(
        lambda: th.rows("SELECT count(*) FROM notice WHERE kind = 'ended'") == [(1,)],
        what="the job's end",
    )
    argv = ("notices", "--all", "--json")
    gputui(user, th.sock, ENGLISH, *argv)  # now read: the same "unread" in both below
    english, chinese = (gputui(user, th.sock, lang, *argv) for lang in (ENGLISH, CHINESE))
    assert english == chinese and english[0] == 0
    rows = json.loads(english[1])
    ended = [n for n in rows if n["kind"] == "ended"]
    assert [n["text"] for n in ended] == [f"job {job} (train) failed (exit 3)"]
    assert all(
        set(n) == {"id", "time", "kind", "text", "job_id", "claim_id", "unread"} for n in rows
    )
    _, en_lines, _ = gputui(user, th.sock, ENGLISH, "notices", "--all")
    _, zh_lines, _ = gputui(user, th.sock, CHINESE, "notices", "--all")
    assert f"job {job} (train) failed (exit 3)" in en_lines
    assert f"作业 {job}（train）失败（退出码 3）" in zh_lines
    assert f"作业 {job}（train）已在 {HOST} 上开始" in zh_lines
