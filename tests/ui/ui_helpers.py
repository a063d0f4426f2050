"""Reading what the console shows, as text, for assertions."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widget import Widget

from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.widgets.gpu_grid import GpuGrid


def lines(widget: Widget) -> list[str]:
    """The widget's visible lines as plain text (Line-API widgets only)."""
    render_line = widget.render_line
    return [render_line(y).text for y in range(widget.size.height)]


def screen_text(app: GpuTuiApp) -> str:
    """Everything on the terminal right now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def help_text(app: GpuTuiApp) -> str:
    """The whole key list of the help screen on top, one ``KEYS  WHAT`` line a key and
    each section's title (not only what fits on the terminal: the help scrolls)."""
    screen = app.screen
    sections = getattr(screen, "sections", None)
    assert sections is not None, "the help screen is not on top"
    lines = []
    for title, rows in sections:
        lines.append(title)
        lines += [f"{keys}  {description}" for keys, description in rows]
    return "\n".join(lines)


def burst(app: GpuTuiApp, keys: list[str]) -> None:
    """Post ``keys`` at once, the way a terminal read of a fast typist's keys arrives
    (Pilot.press waits between keys, which hides what is lost in a burst)."""
    for key in keys:
        character = " " if key == "space" else key if len(key) == 1 else None
        app.post_message(events.Key(key, character))


def told(app: GpuTuiApp) -> list[tuple[str, str]]:
    """Every notice so far as (title, text), oldest first: the history ``N`` shows
    (a toast is the same notice in one line, ``title: text``)."""
    return [(n.title, "\n".join(n.lines)) for n in app.notices]


def grid(app: GpuTuiApp) -> GpuGrid:
    return app.main.grid


def shown(app: GpuTuiApp) -> list[str]:
    """The grid's rows as ``host`` / ``host:index`` keys, in order."""
    return [
        row.host if isinstance(row, HostRow) else f"{row.host}:{row.index}"
        for row in grid(app).rows
        if isinstance(row, HostRow | GpuRow)
    ]


def grid_line(app: GpuTuiApp, key: str) -> str:
    """The rendered text of one grid row (scrolls nothing; renders from the cache)."""
    g = grid(app)
    host, _, index = key.partition(":")
    row = HostRow(host) if not index else GpuRow(host, int(index))
    return g._render_row(row, g.size.width, g.rich_style).text


async def until(
    pilot: Pilot[Any], condition: Callable[[], object], what: str, timeout: float = 10.0
) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` s naming ``what``.

    A wait on what the test needs, not on a fixed time: as quick as the app is, and
    as patient as a loaded machine needs (the timeout is only for a hang).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.01)


async def shows(pilot: Pilot[Any], app: Any, *needles: str, timeout: float = 10.0) -> str:
    """The screen's text once every one of ``needles`` is drawn on it. A wait on the
    app's state (a screen pushed, an answer kept) can end a frame before the screen is
    laid out anew: what is then read from the screen is the old frame."""
    await until(
        pilot, lambda: all(n in screen_text(app) for n in needles), f"{needles!r} drawn", timeout
    )
    return screen_text(app)


async def steady(pilot: Pilot[Any], app: GpuTuiApp, timeout: float = 10.0) -> list[str]:
    """The screen's rows once it stays as it is: no rebuild of the grid still to come
    (they are paced) and the same on two looks an idle app apart. What a test compares
    a later screen with (one taken mid-way showed a pane a column narrower)."""
    await until(pilot, lambda: not app.main._rebuild_pending, "the grid's rebuild", timeout)
    deadline, last = time.monotonic() + timeout, None
    while True:
        await pilot.pause()
        now = screen_text(app).splitlines()
        if now == last:
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen did not settle in {timeout:g} s")
        last = now


async def select(pilot: Pilot[Any], app: GpuTuiApp, row: GpuRow) -> None:
    """Put the grid's cursor on ``row`` and make sure it stays there: a rebuild of the
    grid that was under way may put back the row it had."""

    def there() -> bool:
        if grid(app).cursor_row != row:
            grid(app).select(row)
        return grid(app).cursor_row == row

    await until(pilot, there, f"the cursor on {row}")
    await pilot.pause(0.05)  # a rebuild already scheduled lands now: check again
    await until(pilot, there, f"the cursor on {row}")
