"""The one-line cluster summary at the top of the main screen."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gputui.ui import format as fmt
from gputui.ui.model import ClusterSummary


class SummaryBar(Widget):
    """Hosts live/total, GPUs, busy, memory, problems, sort, filter and the clock."""

    DEFAULT_CSS = """
    SummaryBar {
        height: 1;
        width: 1fr;
    }
    """

    COMPONENT_CLASSES = {
        "summary-bar--title",
        "summary-bar--label",
        "summary-bar--ok",
        "summary-bar--warn",
        "summary-bar--crit",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = Text(no_wrap=True, overflow="ellipsis", end="")
        self._clock = ""

    def show(
        self,
        summary: ClusterSummary,
        *,
        now: float,
        sort: str,
        query: str,
        grouped: bool,
        head: str | None = None,
        head_problem: bool = False,
    ) -> None:
        """Redraw from a fresh summary; cheap (one line).

        ``head``: the scheduler's part (``3 running, 2 queued`` or ``head unreachable
        (why)``); None when no head is configured."""
        style = self.get_component_rich_style
        label = style("summary-bar--label", partial=True)
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append(" gputui ", style("summary-bar--title", partial=True))
        crit = style("summary-bar--crit", partial=True)
        if head is not None and head_problem:
            # First, so that an 80-column pane still shows it whole.
            text.append(" ")
            text.append("!! " + head, crit)
            text.append(" ")
        text.append(" hosts ", label)
        live_style = (
            "summary-bar--ok" if summary.hosts_live == summary.hosts_total else "summary-bar--warn"
        )
        text.append(f"{summary.hosts_live}/{summary.hosts_total}", style(live_style, partial=True))
        text.append("  GPUs ", label)
        text.append(str(summary.gpus))
        text.append("  busy ", label)
        text.append(str(summary.busy))
        text.append("  mem ", label)
        text.append(fmt.mem_pair(summary.mem_used_mib, summary.mem_total_mib))
        text.append("  ")
        if summary.problems:
            text.append(
                f"!! {summary.problems} problem{'s' if summary.problems != 1 else ''}",
                crit,
            )
        else:
            text.append("no problems", style("summary-bar--ok", partial=True))
        if head is not None and not head_problem:
            text.append("  head ", label)
            text.append(head)
        text.append("  sort:", label)
        text.append(sort + ("" if grouped else " (all hosts)"))
        if query:
            text.append("  filter ", label)
            text.append(query, style("summary-bar--warn", partial=True))
        self._text = text
        self._clock = fmt.clock_time(now)
        self.refresh()  # one line, fixed size: no layout pass

    def render(self) -> Text:
        # The clock goes to the right edge of the width the bar has now, so it is
        # placed at draw time, not when the numbers arrived (the size may change).
        text = self._text.copy()
        width = self.size.width
        if width and text.cell_len > width:
            # Cut with an ellipsis at the edge (left to itself, a line too long wraps at
            # a space, and the bar's one row shows only what came before it).
            text.truncate(width, overflow="ellipsis")
            return text
        gap = width - text.cell_len - len(self._clock) - 1
        if gap > 0:
            text.append(" " * gap)
            text.append(
                self._clock + " ", self.get_component_rich_style("summary-bar--label", partial=True)
            )
        return text
