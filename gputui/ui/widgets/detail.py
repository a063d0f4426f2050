"""The detail pane: everything known about the selected GPU (or host), with sparklines."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputui.common.i18n import N_, _
from gputui.common.text import cells, fit
from gputui.health import Flag, data_notes, host_message
from gputui.health.words import shown
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuHistory, GpuView
from gputui.ui.model import HostEntry
from gputui.ui.widgets.titles import set_border_title
from gputui.wire.messages import Event

_BLOCKS = "▁▂▃▄▅▆▇█"
_LABEL_W = 9
GPU_STATES = {"lost": N_("LOST"), "error": N_("ERROR")}
"""A GPU's state word (other states are shown upper-cased, as they come)."""
THROTTLES = {
    "hw_slowdown": N_("hw_slowdown"),
    "hw_thermal": N_("hw_thermal"),
    "hw_power_brake": N_("hw_power_brake"),
    "sw_thermal": N_("sw_thermal"),
    "sw_power_cap": N_("sw_power_cap"),
    "applications_clocks": N_("applications_clocks"),
    "sync_boost": N_("sync_boost"),
    "display_clocks": N_("display_clocks"),
}
"""The throttle reasons NVML names, for the detail's ``throttle`` line."""
_FINGERPRINT_W = 51
"""``SHA256:`` and 43 characters, and a comma: the longest word a host message has."""


def spark(values: Sequence[float], low: float, high: float, width: int) -> str:
    """The last ``width`` values as one line of eighth-blocks on a fixed scale.

    A fixed scale (0-100 % for utilisation) keeps an idle GPU flat at the bottom,
    where a min-max scale would draw a constant as a full bar.
    """
    if width <= 0 or not values:
        return ""
    span = max(high - low, 1e-9)
    tail = list(values)[-width:]
    top = len(_BLOCKS) - 1
    return "".join(_BLOCKS[max(0, min(top, round((v - low) / span * top)))] for v in tail)


class DetailPane(VerticalScroll):
    """Facts and recent history of one GPU; for a host header, the host's facts."""

    DEFAULT_CSS = """
    DetailPane {
        height: 1fr;
    }
    DetailPane > Static {
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "detail-pane--label",
        "detail-pane--warn",
        "detail-pane--crit",
        "detail-pane--spark",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._body = Static("", id="detail-text")
        self._lines = -1
        self._tallest = 0
        self._host_shown: tuple[HostEntry, float] | None = None
        """The host on show, so its wrapped message can be redone when the pane resizes."""

    def compose(self) -> ComposeResult:
        yield self._body

    def show_gpu(
        self,
        gpu: GpuView,
        entry: HostEntry,
        history: GpuHistory | None,
        events: Sequence[Event],
        now: float,
        *,
        flags: Sequence[Flag] = (),
        held: str | None = None,
        flagged: Sequence[str] = (),
    ) -> None:
        """``flags`` are the grid's verdicts on this GPU, so both say the same;
        ``held`` says which job or claim holds it (None: no scheduler); ``flagged``
        says why the head flags processes on it (one line each)."""
        self._host_shown = None
        self._set_title(_("{host} GPU {index}").format(host=gpu.host, index=gpu.index))
        severity = {flag.label.split()[0]: flag.severity for flag in flags}
        info, sample = gpu.info, gpu.sample
        text = Text(no_wrap=True, overflow="ellipsis")
        self._pair(text, N_("model"), info.name if info else _("unknown"))
        if held is not None:
            self._pair(text, N_("held by"), held)
        for i, why in enumerate(flagged):  # wrapped, never cut: it says why and when
            self._wrapped(text, N_("flagged") if i == 0 else "", why, "warn")
        if sample is not None and (sample.state != "ok" or sample.message):
            word = _(GPU_STATES.get(sample.state, sample.state.upper()))
            state = (
                _("{state}: {message}").format(state=word, message=shown(sample.message))
                if sample.message
                else word
            )
            self._pair(text, N_("state"), state, "crit")
        self._sparks(text, gpu, history)
        self._pair(text, N_("uuid"), gpu.uuid or "-")
        self._pair(text, N_("bus id"), (info.pci_bus_id if info else None) or "-")
        hello = entry.hello
        if hello is not None:
            cuda = f"  CUDA {hello.cuda}" if hello.cuda else ""
            self._pair(text, N_("driver"), (hello.driver or "-") + cuda)
        if sample is not None:
            clocks = _("SM {sm} MHz, mem {mem} MHz").format(
                sm=_opt(sample.clock_sm_mhz), mem=_opt(sample.clock_mem_mhz)
            )
            self._pair(text, N_("clocks"), clocks)
            max_gen = info.pcie_max_gen if info else None
            max_width = info.pcie_max_width if info else None
            pcie = _("gen{gen} x{width} (max gen{max_gen} x{max_width})").format(
                gen=_opt(sample.pcie_gen),
                width=_opt(sample.pcie_width),
                max_gen=_opt(max_gen),
                max_width=_opt(max_width),
            )
            degraded = (
                sample.pcie_gen is not None
                and max_gen is not None
                and (sample.pcie_gen, sample.pcie_width or 0) < (max_gen, max_width or 0)
            )
            self._pair(text, "PCIe", pcie, "warn" if degraded else None)
            ecc = _("{corrected} corr, {uncorrected} uncorr").format(
                corrected=_opt(sample.ecc_corrected), uncorrected=_opt(sample.ecc_uncorrected)
            )
            self._pair(text, "ECC", ecc, severity.get("ECC"))
            throttle = (
                "-"
                if sample.throttle is None
                else _(", ").join(_(THROTTLES.get(r, r)) for r in sample.throttle) or _("none")
            )
            self._pair(text, N_("throttle"), throttle, severity.get("THRTL"))
            if sample.errors:
                errors = ", ".join(f"{k}={v}" for k, v in sorted(sample.errors.items()))
                self._pair(text, N_("n/a"), errors)
        recent = list(events)[-5:]
        if not recent:
            self._pair(text, N_("events"), _("none"))
        for i, event in enumerate(reversed(recent)):
            line = Text()
            if event.time is None:
                line.append(_("time unknown") + " ")
            else:
                ago = fmt.duration(now - event.time)
                when = _("{time} ({ago} ago)").format(time=fmt.clock_time(event.time), ago=ago)
                line.append(when + " ")
            what = f"Xid {event.xid}" if event.xid is not None else _(event.kind)
            line.append(what, self._style("crit" if event.xid is not None else "warn"))
            if event.text:
                line.append(": " + event.text)
            text.append(_label(N_("events")) if i == 0 else " " * _LABEL_W, self._style("label"))
            text.append_text(line)
            text.append("\n")
        self._set_body(text)

    def show_host(self, entry: HostEntry, now: float) -> None:
        self._host_shown = (entry, now)
        snap = entry.snapshot
        self._set_title(snap.name)
        text = Text(no_wrap=True, overflow="ellipsis")
        problem = snap.status.is_problem
        self._pair(text, N_("status"), fmt.status_word(snap.status), "crit" if problem else None)
        message = host_message(snap)
        if message:
            # Wrapped, never cut: a changed host key's two fingerprints, a path to fix.
            self._wrapped(text, N_("message"), shown(message), "crit" if problem else None)
        self._pair(text, N_("data age"), fmt.data_age(snap.age(now)))
        if snap.next_retry_at is not None:
            self._pair(text, N_("retry"), fmt.retry_in(snap.next_retry_at, now))
        self._pair(text, N_("address"), snap.address)
        self._pair(text, N_("pool"), snap.pool)
        if snap.labels:
            labels = ", ".join(f"{k}={v}" for k, v in snap.labels.items())
            self._pair(text, N_("labels"), labels)
        hello = snap.hello
        if hello is not None:
            self._pair(text, N_("hostname"), hello.hostname)
            self._pair(text, N_("driver"), f"{hello.driver or '-'}  CUDA {hello.cuda or '-'}")
            helper = _("{version}, signals via {method}").format(
                version=hello.helper_version, method=hello.signal_method
            )
            simulated = "  " + _("(simulated GPUs)") if hello.simulated else ""
            self._pair(text, N_("helper"), helper + simulated)
        self._pair(text, "GPUs", str(len(entry.gpus)))
        for i, note in enumerate(data_notes(snap)):
            self._pair(text, N_("bad data") if i == 0 else "", note, "warn")
        self._set_body(text)

    def on_resize(self) -> None:
        # A host's message is wrapped to the pane's width: wrap it anew.
        if self._host_shown is not None:
            self.show_host(*self._host_shown)

    def clear_detail(self) -> None:
        self._host_shown = None
        self._set_title(_("detail"))
        self._set_body(Text())

    def _set_title(self, title: str) -> None:
        set_border_title(self, title)  # the border line only, not the whole pane

    def _set_body(self, text: Text) -> None:
        # Redrawn every second and on every cursor move, and a change in height
        # costs a layout pass (two, with the body's own resize): so while it fits
        # the pane, the body keeps the height of the tallest detail shown so far,
        # padded with blank lines, and moving between a host and a GPU repaints only.
        lines = text.plain.count("\n")
        room = self.scrollable_content_region.height
        height = max(lines, min(self._tallest, room))
        if height > lines:
            text.append("\n" * (height - lines))
        self._tallest = max(self._tallest, lines)
        self._body.update(text, layout=height != self._lines)
        self._lines = height

    def _sparks(self, text: Text, gpu: GpuView, history: GpuHistory | None) -> None:
        width = max(0, (self.size.width or 40) - _LABEL_W - 7)
        style = self._style("spark")
        power_top = gpu.power_limit or (max(history.power) if history and history.power else 1.0)
        rows = (
            (N_("util"), fmt.percent(gpu.util), history.util if history else (), 0.0, 100.0),
            (N_("mem"), fmt.percent(gpu.mem_pct), history.mem if history else (), 0.0, 100.0),
            (N_("temp"), fmt.temperature(gpu.temp), history.temp if history else (), 20.0, 100.0),
            (
                N_("power"),
                "-" if gpu.power is None else f"{gpu.power:.0f}W",
                history.power if history else (),
                0.0,
                power_top,
            ),
        )
        for label, now_text, values, low, high in rows:
            text.append(_label(label), self._style("label"))
            text.append(" " * max(0, 5 - cells(now_text)) + now_text + "  ")
            text.append(spark(values, low, high, width), style)
            text.append("\n")

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"detail-pane--{name}", partial=True)

    def _wrapped(self, text: Text, label: str, value: str, severity: str | None = None) -> None:
        """``_pair`` over as many lines as ``value`` needs at the pane's width.

        A pane too narrow for a fingerprint beside the label (80 columns split in
        three) gives the value the whole width, under its label.
        """
        pane_width = self.scrollable_content_region.width or self.size.width or 80
        indent = _LABEL_W if pane_width - _LABEL_W > _FINGERPRINT_W else 0
        if not indent:
            text.append(_(label) + "\n", self._style("label"))
        width = max(16, pane_width - indent - 1)
        style = self._style(severity) if severity else Style()
        lines = wrap_cells(value, width) or [""]
        for i, line in enumerate(lines):
            if indent:
                text.append(_label(label if i == 0 else ""), self._style("label"))
            text.append(line, style)
            text.append("\n")

    def _pair(self, text: Text, label: str, value: str, severity: str | None = None) -> None:
        text.append(_label(label), self._style("label"))
        text.append(value, self._style(severity) if severity else Style())
        text.append("\n")


_PIECES = re.compile(r"[^\s\u2e80-\uffff]+\s*|[\u2e80-\uffff]\s*|\s+")
"""A run of narrow characters (a word), or one wide character, with the spaces after."""


def wrap_cells(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` display cells. Text of narrow characters
    only is wrapped as ``textwrap`` does (at spaces); text with wide ones (Chinese,
    which has no spaces between words) may also break between two wide characters."""
    if cells(text) == len(text):
        return textwrap.wrap(text, width, break_on_hyphens=False)
    lines: list[str] = []
    line = ""
    for piece in _PIECES.findall(" ".join(text.split())):
        if cells(line + piece.rstrip()) <= width:
            line += piece
            continue
        if line.strip():
            lines.append(line.rstrip())
        line = piece.lstrip()
        while cells(line.rstrip()) > width:  # a word wider than the line: cut it
            head = cut_cells(line, width)
            lines.append(head)
            line = line[len(head) :]
    if line.strip():
        lines.append(line.rstrip())
    return lines


def cut_cells(text: str, width: int) -> str:
    """The longest start of ``text`` (at least one character) in ``width`` cells."""
    end = 1
    while end < len(text) and cells(text[: end + 1]) <= width:
        end += 1
    return text[:end]


def _label(label: str) -> str:
    """``label`` in the reader's language, padded to the labels' column by display
    cells (a Chinese label is two cells a character); one wider gets a space after it."""
    said = _(label)
    return fit(said, max(_LABEL_W, cells(said) + 1))


def _opt(value: object) -> str:
    return "-" if value is None else str(value)
