"""The console's toasts about the head, in the user's language: a notice's title by
its kind, what the head answers a job action (``told``), a request it refuses and one
the console cannot make (``cannot {what}``), the drain key's titles. In Chinese under
``zh_CN``; under English exactly the lines and titles they were. A real head (real
daemon, socket and SQLite file, its hosts scripted), the real app under a pilot."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_scheduler import LAYOUT, connected, console
from ui_helpers import until

from gputui.common import i18n
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.link import HeadNotice
from gputui.ui.notices import Notice
from gputui.ui.screens.queue import QueueScreen

from headkit import running_head  # isort: skip  (tests/scheduler, put on sys.path by test_scheduler)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words  # isort: skip  (tests/i18n, put on sys.path above)

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001


@pytest.fixture(params=["en_US.UTF-8", "zh_CN.UTF-8"])
def lang(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("LANG", request.param)
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    i18n.reset()
    yield request.param
    i18n.reset()


def noted(app: GpuTuiApp) -> list[Notice]:
    return list(app.notices.newest_first())


def seen(app: GpuTuiApp, title: str, part: str) -> bool:
    return any(n.title == title and any(part in line for line in n.lines) for n in noted(app))


CANNOT = "无法执行：{what}"

KINDS = {
    "claim": ("claim", "认领"),
    "booking": ("booking", "预约"),
    "admin": ("an admin acted", "管理员操作"),
    "fence": ("GPU fenced", "GPU 已隔离"),
    "started": ("job started", "作业已开始"),
    "something-newer": ("scheduler", None),
}


async def test_the_consoles_toasts_about_the_head_read_in_its_language(
    tmp_path: Path, lang: str
) -> None:
    chinese = lang.startswith("zh")
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=(200, 50)) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            job = (await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1)))["job"][
                "id"
            ]
            await until(pilot, lambda: hosts.launches, "the launch")
            # A job action the head refuses, then one it does: what it says happens next.
            app.head.jobs.act(QueueScreen.JobAction("hold", job))
            app.head.jobs.act(QueueScreen.JobAction("kill", job))
            if chinese:
                told = "现在发送 SIGTERM，宽限期后发送 SIGKILL，以已杀死结束"
                await until(pilot, lambda: any(told in str(n.lines) for n in noted(app)), "told")
                refused = "只有排队中的作业可以挂起"
            else:
                told = "it gets SIGTERM now, SIGKILL after the grace period, and ends killed"
                await until(pilot, lambda: seen(app, f"kill job {job}", told), "told")
                refused = f"job {job} is running; only a queued job is held"
            await until(pilot, lambda: any(refused in str(n.lines) for n in noted(app)), "refused")
            # Requests the console cannot make: no row selected.
            app.head.claims.claim_row(None)
            app.head.drains.drain_row(None)
            for what in ("认领", "排空") if chinese else ("claim", "drain"):
                title = CANNOT.format(what=what) if chinese else f"cannot {what}"
                await until(pilot, lambda t=title: any(n.title == t for n in noted(app)), title)
            # A notice of each kind the head sends (and one this console does not know).
            for kind in KINDS:
                app.head.notice(HeadNotice(kind=kind, text=f"{kind} n"))
            for kind, (english, zh) in KINDS.items():
                title = (zh or "调度器") if chinese else english
                await until(pilot, lambda k=kind, t=title: seen(app, t, f"{k} n"), title)
    if chinese:
        words = " ".join(f"{n.title} {' '.join(n.lines)}" for n in noted(app))
        allowed = {"train", "gpu", "hold", "kill", *KINDS, "something-newer", "something", "newer"}
        assert english_words(words, allowed) == [], words
