"""What the help screen (``?``) lists: every key of the console, by where it works,
and what the GPU grid's columns mean.

Gathered from the bindings of the screens and widgets themselves (so the help never
falls behind a key), plus the head's sections when a head is configured; the help
screen (``screens.help``) only lays them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import BindingType

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
    return [
        section("Anywhere", anywhere),
        section(
            "Main screen",
            [b for b in MainScreen.BINDINGS if b not in MainScreen.SCHEDULER_BINDINGS],
        ),
        section("GPU grid", GpuGrid.BINDINGS),
        section("Any table (processes, queue, audit, health)", ROW_KEYS),
        ("GPU grid columns (narrow panes leave out POWER, OWNERS, FAN, SM)", GRID_LEGEND),
        section("Health view (h)", HealthScreen.BINDINGS),
        *head_sections,
        (title, [*confirm, ("Enter", "Press the focused button (Cancel at first)")]),
        (
            "Mouse and focus",
            [
                ("Tab", "Move between the grid, processes and filter"),
                ("Click", "Select a row; click ▾/▸ or double-click to fold a host"),
            ],
        ),
    ]
