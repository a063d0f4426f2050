"""The one-line cluster summary at the top of the main screen.

The line is made of parts (problems, GPUs busy and free, the head's jobs and claims,
hosts, memory, sort, filter, the clock), each with a shorter form or none. When the
pane is narrow, the least important give way first, in ``NARROWING`` order, so that an
80-column pane shows the counts that matter whole: never a part cut mid-word.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from gputui.common.i18n import N_, _, ngettext
from gputui.ui import format as fmt
from gputui.ui.model import ClusterSummary

SEP = "  "
SORT_NAMES = {
    "host": N_("host"),
    "util": N_("util"),
    "mem": N_("mem"),
    "temp": N_("temp"),
    "power": N_("power"),
    "free": N_("free"),
}
"""The sort keys as the line names them (``sort:util``)."""
SCHEDULERS = {"head": N_("head"), "slurm": "slurm"}
"""The scheduler's label before its counts."""
NARROWING: tuple[tuple[str, int], ...] = (
    ("clock", 1),
    ("sort", 1),
    ("mem", 1),
    ("head", 1),
    ("hosts", 1),
    ("head", 2),
    ("sort!", 1),
    ("hosts!", 1),
    ("head", 3),
    ("filter", 1),
)
"""How the line narrows: (part, its next form; past its last form, the part is gone).
``sort`` and ``hosts`` give way early only while they say nothing new (the usual sort,
every host live); ``sort!`` and ``hosts!`` are the same parts later on. The problems,
the GPUs (busy and free) and a head that cannot be reached (``alarm``, first, with
its reason: cut at the edge if it must be) always stay."""


class SummaryBar(Widget):
    """Problems, GPUs busy and free, the head's jobs, hosts, memory, sort, filter, clock."""

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
        """The whole line, every part in its longest form (what a wide pane shows)."""
        self._parts: list[tuple[str, list[Text]]] = []
        self._usual: set[str] = set()
        """Parts that say nothing new now (``sort``, ``hosts``): they go first."""
        self._clock = ""

    def show(
        self,
        summary: ClusterSummary,
        *,
        now: float,
        sort: str,
        query: str,
        grouped: bool,
        head: str | Sequence[str] | None = None,
        head_problem: bool = False,
        scheduler: str = "head",
    ) -> None:
        """Redraw from a fresh summary; cheap (one line).

        ``head``: the scheduler's part (``3 running, 2 waiting`` or ``head unreachable
        (why)``), or its forms longest first; None when no head is configured;
        ``scheduler``: its label (``head``, or ``slurm``)."""
        style = self.get_component_rich_style
        label = style("summary-bar--label", partial=True)
        crit = style("summary-bar--crit", partial=True)
        ok = style("summary-bar--ok", partial=True)
        heads = [head] if isinstance(head, str) else list(head or ())
        parts: list[tuple[str, list[Text]]] = []

        def part(name: str, *forms: Text) -> None:
            parts.append((name, list(forms)))

        part("title", Text(" gputui ", style("summary-bar--title", partial=True)))
        if heads and head_problem:
            part("alarm", *_head_forms(heads, crit, label, problem=True))
        if summary.problems:
            n = summary.problems
            problems = Text(ngettext("!! {n} problem", "!! {n} problems", n).format(n=n), crit)
        else:
            problems = Text(_("no problems"), ok)
        part("problems", problems)
        gpus = _pairs(
            label,
            (_("GPUs") + " ", str(summary.gpus)),
            (_("busy") + " ", str(summary.busy)),
            (_("free") + " ", str(summary.free)),
        )
        part("gpus", gpus)
        if heads and not head_problem:
            part("head", *_head_forms(heads, crit, label, problem=False, name=scheduler))
        all_live = summary.hosts_live == summary.hosts_total
        hosts = Text(_("hosts") + " ", label)
        hosts.append(
            f"{summary.hosts_live}/{summary.hosts_total}",
            style("summary-bar--ok" if all_live else "summary-bar--warn", partial=True),
        )
        part("hosts", hosts)
        mem = fmt.mem_pair(summary.mem_used_mib, summary.mem_total_mib)
        part("mem", _pairs(label, (_("mem") + " ", mem)))
        sort_text = Text(_("sort:"), label)
        sort_name = _(SORT_NAMES.get(sort, sort))
        sort_text.append(sort_name if grouped else _("{sort} (all hosts)").format(sort=sort_name))
        part("sort", sort_text)
        if query:
            shown = Text(_("filter") + " ", label)
            shown.append(query, style("summary-bar--warn", partial=True))
            part("filter", shown)
        self._parts = parts
        self._usual = set()
        if sort == "host" and grouped:
            self._usual.add("sort")
        if all_live:
            self._usual.add("hosts")
        self._text = _join(p[1][0] for p in parts)
        self._clock = fmt.clock_time(now)
        self.refresh()  # one line, fixed size: no layout pass

    def render(self) -> Text:
        # Laid out at draw time, not when the numbers arrived: the size may change.
        width = self.size.width
        label = self.get_component_rich_style("summary-bar--label", partial=True)
        clock = Text(self._clock + " ", label)
        text = narrowed(self._parts, self._usual, clock, width)
        if width and text.cell_len > width:
            # Only where even the fewest parts do not fit (a very narrow pane).
            text.truncate(width, overflow="ellipsis")
        return text


def narrowed(
    parts: Sequence[tuple[str, list[Text]]], usual: set[str], clock: Text, width: int
) -> Text:
    """The parts that fit in ``width`` cells (``NARROWING``), the clock at the right edge."""
    chosen = {name: 0 for name, _ in parts}
    with_clock = True

    def line() -> Text:
        text = _join(forms[chosen[name]] for name, forms in parts if chosen[name] < len(forms))
        if with_clock:
            gap = width - text.cell_len - clock.cell_len
            text.append(" " * max(1, gap))
            text.append_text(clock)
        return text

    text = line()
    if not width:
        return text
    for step, form in NARROWING:
        if text.cell_len <= width:
            break
        if step == "clock":
            with_clock = False
        else:
            name = step.removesuffix("!")
            if step in ("sort", "hosts") and step not in usual:
                continue
            if name in chosen:
                chosen[name] = max(chosen[name], form)
        text = line()
    return text


def _join(parts: Iterable[Text]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    for i, part in enumerate(parts):
        text.append(" " if i == 1 else SEP if i else "")
        text.append_text(part)
    return text


def _pairs(label: Style, *pairs: tuple[str, str]) -> Text:
    """``GPUs 20  busy 8``: each label dim, each value plain."""
    text = Text()
    for i, (name, value) in enumerate(pairs):
        if i:
            text.append(SEP)
        text.append(name, label)
        text.append(value)
    return text


def _head_forms(
    heads: list[str], crit: Style, label: Style, *, problem: bool, name: str = "head"
) -> list[Text]:
    """The head's part in each of its forms, longest first: ``head 4 running, 2
    waiting`` ... ``head 4 run, 2 wait``, then that without its label; a problem, then that
    problem without its reason in brackets."""
    if problem:
        reason = heads[0]
        short = reason.partition(" (")[0]
        return [Text("!! " + form, crit) for form in dict.fromkeys((reason, short))]
    forms = []
    for form in heads:
        text = Text(_(SCHEDULERS.get(name, name)) + " ", label)
        text.append(form)
        forms.append(text)
    return [*forms, Text(heads[-1])]


def head_forms(running: int, waiting: int, mine: int) -> tuple[str, ...]:
    """The head's part of the line, longest first: ``4 running, 2 waiting, 1 claim of
    yours``, then ``... 1 claim``, then ``4 run, 2 wait, 1 claim``."""
    if not mine:
        long = _("{running} running, {waiting} waiting").format(running=running, waiting=waiting)
        short = _("{running} run, {waiting} wait").format(running=running, waiting=waiting)
        return (long, long, short)
    counts = {"running": running, "waiting": waiting, "mine": mine}
    return (
        ngettext(
            "{running} running, {waiting} waiting, {mine} claim of yours",
            "{running} running, {waiting} waiting, {mine} claims of yours",
            mine,
        ).format(**counts),
        ngettext(
            "{running} running, {waiting} waiting, {mine} claim",
            "{running} running, {waiting} waiting, {mine} claims",
            mine,
        ).format(**counts),
        ngettext(
            "{running} run, {waiting} wait, {mine} claim",
            "{running} run, {waiting} wait, {mine} claims",
            mine,
        ).format(**counts),
    )
