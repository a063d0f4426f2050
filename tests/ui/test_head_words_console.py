"""The head's words in the console, in the user's language: a notice (a job that
ended) on the notice line and in ``N`` then ``h`` (the head's history of yours), and
a refused request's line, in Chinese under ``zh_CN`` and exactly the head's English
line under English. A real head (real daemon, socket and SQLite file, its hosts
scripted), the real app under a pilot, at 80x24 and 200x50."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_scheduler import LAYOUT, connected, console
from ui_helpers import screen_text, until

from gputui.common import i18n
from gputui.scheduler.head.actions import run_key
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.notices import NoticesScreen

from headkit import running_head  # isort: skip  (tests/scheduler, put on sys.path by test_scheduler)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words  # isort: skip  (tests/i18n, put on sys.path above)

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

SIZES = [(80, 24), (200, 50)]


@pytest.fixture(params=["en_US.UTF-8", "zh_CN.UTF-8"])
def lang(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("LANG", request.param)
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    i18n.reset()
    yield request.param
    i18n.reset()


def lines_of(app: GpuTuiApp) -> list[str]:
    return [line for n in app.notices for line in n.lines]


@pytest.mark.parametrize("size", SIZES)
async def test_the_heads_words_reach_the_console_in_its_language(
    tmp_path: Path, size: tuple[int, int], lang: str
) -> None:
    chinese = lang.startswith("zh")
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            answer = await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1))
            job = answer["job"]["id"]
            await until(pilot, lambda: hosts.launches, "the launch")
            hosts.finish(hosts.launches[-1].host, run_key(job, 1), 3)
            ended = (
                f"作业 {job}（train）失败（退出码 3）"
                if chinese
                else f"job {job} (train) failed (exit 3)"
            )
            await until(pilot, lambda: ended in lines_of(app), f"the notice {ended!r}")
            # A refused request: its line on the notice line.
            await app.head.asks.call(link, "cancel", "cancel", lambda b: b.cancel(job + 99))
            refused = f"没有作业 {job + 99}" if chinese else f"no job {job + 99}"
            await until(pilot, lambda: refused in lines_of(app), f"the refusal {refused!r}")
            # The head's history of your notices: N, then h.
            await pilot.press("N")
            await until(pilot, lambda: isinstance(app.screen, NoticesScreen), "the notices")
            await pilot.press("h")
            started = (
                f"作业 {job}（train）已在 gpu01 上开始"
                if chinese
                else f"job {job} (train) started on gpu01"
            )
            await until(pilot, lambda: started in screen_text(app), "the history")
            text = screen_text(app)
            assert ended in text
            assert all(len(line) <= size[0] for line in text.splitlines())
    heads = [line for line in lines_of(app) if str(job) in line]
    if chinese:
        assert english_words(" ".join(heads), {"train", "gpu"}) == [], heads  # gpu01: the host
