"""What the help screen (``?``) lists: every key of the console, by where it works,
and what the GPU grid's columns mean.

Gathered from the bindings of the screens and widgets themselves (so the help never
falls behind a key), plus the head's sections when a head is configured; the help
screen (``screens.help``) only lays them out. Titles and what each key does are
shown in the chosen language (``gputui.common.i18n``); the keys themselves are not.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import BindingType

from gputui.common.i18n import _
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.health import HealthScreen
from gputui.ui.screens.help import HelpSection, section
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.gpu_grid import GpuGrid
from gputui.ui.widgets.grid_columns import GRID_LEGEND
from gputui.ui.widgets.rows import ROW_KEYS


def help_sections(
    anywhere: Sequence[BindingType], head_sections: Sequence[HelpSection]
) -> list[HelpSection]:
    """The help's sections: the app's own keys (``anywhere``), then each screen's and
    widget's, the head's (``head_sections``), the confirmation's, mouse and focus."""
    title, confirm = section("Confirmation (SIGTERM / SIGKILL)", ConfirmScreen.BINDINGS)
    legend = [(_(column), _(meaning)) for column, meaning in GRID_LEGEND]
    sections: list[HelpSection] = [
        section("Anywhere", anywhere),
        section(
            "Main screen",
            [b for b in MainScreen.BINDINGS if b not in MainScreen.SCHEDULER_BINDINGS],
        ),
        section("GPU grid", GpuGrid.BINDINGS),
        section("Any table (processes, queue, audit, health)", ROW_KEYS),
        ("GPU grid columns (narrow panes leave out POWER, OWNERS, FAN, SM)", legend),
        section("Health view (h)", HealthScreen.BINDINGS),
        *head_sections,
        (title, [*confirm, ("Enter", "Press the focused button (Cancel at first)")]),
        (
            "Mouse and focus",
            [
                ("Tab", "Move between the grid, processes and filter"),
                (_("Click"), "Select a row; click ▾/▸ or double-click to fold a host"),
            ],
        ),
    ]
    return [
        (_(name), rows if rows is legend else [(key, _(text)) for key, text in rows])
        for name, rows in sections
    ]
