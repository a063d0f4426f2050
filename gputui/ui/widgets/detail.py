"""The detail pane: everything known about the selected GPU (or host), with sparklines."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputui.health import Flag, data_notes, host_message
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuHistory, GpuView
from gputui.ui.model import HostEntry
from gputui.ui.widgets.titles import set_border_title
from gputui.wire.messages import Event

_BLOCKS = "▁▂▃▄▅▆▇█"
_LABEL_W = 9
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
        self._set_title(f"{gpu.host} GPU {gpu.index}")
        severity = {flag.label.split()[0]: flag.severity for flag in flags}
        info, sample = gpu.info, gpu.sample
        text = Text(no_wrap=True, overflow="ellipsis")
        self._pair(text, "model", info.name if info else "unknown")
        if held is not None:
            self._pair(text, "held by", held)
        for i, why in enumerate(flagged):  # wrapped, never cut: it says why and when
            self._wrapped(text, "flagged" if i == 0 else "", why, "warn")
        if sample is not None and (sample.state != "ok" or sample.message):
            state = sample.state.upper() + (f": {sample.message}" if sample.message else "")
            self._pair(text, "state", state, "crit")
        self._sparks(text, gpu, history)
        self._pair(text, "uuid", gpu.uuid or "-")
        self._pair(text, "bus id", (info.pci_bus_id if info else None) or "-")
        hello = entry.hello
        if hello is not None:
            cuda = f"  CUDA {hello.cuda}" if hello.cuda else ""
            self._pair(text, "driver", (hello.driver or "-") + cuda)
        if sample is not None:
            clocks = f"SM {_opt(sample.clock_sm_mhz)} MHz, mem {_opt(sample.clock_mem_mhz)} MHz"
            self._pair(text, "clocks", clocks)
            max_gen = info.pcie_max_gen if info else None
            max_width = info.pcie_max_width if info else None
            pcie = (
                f"gen{_opt(sample.pcie_gen)} x{_opt(sample.pcie_width)} "
                f"(max gen{_opt(max_gen)} x{_opt(max_width)})"
            )
            degraded = (
                sample.pcie_gen is not None
                and max_gen is not None
                and (sample.pcie_gen, sample.pcie_width or 0) < (max_gen, max_width or 0)
            )
            self._pair(text, "PCIe", pcie, "warn" if degraded else None)
            ecc = f"{_opt(sample.ecc_corrected)} corr, {_opt(sample.ecc_uncorrected)} uncorr"
            self._pair(text, "ECC", ecc, severity.get("ECC"))
            throttle = "-" if sample.throttle is None else ", ".join(sample.throttle) or "none"
            self._pair(text, "throttle", throttle, severity.get("THRTL"))
            if sample.errors:
                errors = ", ".join(f"{k}={v}" for k, v in sorted(sample.errors.items()))
                self._pair(text, "n/a", errors)
        recent = list(events)[-5:]
        if not recent:
            self._pair(text, "events", "none")
        for i, event in enumerate(reversed(recent)):
            line = Text()
            if event.time is None:
                line.append("time unknown ")
            else:
                ago = fmt.duration(now - event.time)
                line.append(f"{fmt.clock_time(event.time)} ({ago} ago) ")
            what = f"Xid {event.xid}" if event.xid is not None else event.kind
            line.append(what, self._style("crit" if event.xid is not None else "warn"))
            if event.text:
                line.append(": " + event.text)
            text.append(
                "events".ljust(_LABEL_W) if i == 0 else " " * _LABEL_W, self._style("label")
            )
            text.append_text(line)
            text.append("\n")
        self._set_body(text)

    def show_host(self, entry: HostEntry, now: float) -> None:
        self._host_shown = (entry, now)
        snap = entry.snapshot
        self._set_title(snap.name)
        text = Text(no_wrap=True, overflow="ellipsis")
        problem = snap.status.is_problem
        self._pair(text, "status", snap.status.value, "crit" if problem else None)
        message = host_message(snap)
        if message:
            # Wrapped, never cut: a changed host key's two fingerprints, a path to fix.
            self._wrapped(text, "message", message, "crit" if problem else None)
        self._pair(text, "data age", fmt.data_age(snap.age(now)))
        if snap.next_retry_at is not None:
            self._pair(text, "retry", fmt.retry_in(snap.next_retry_at, now))
        self._pair(text, "address", snap.address)
        self._pair(text, "pool", snap.pool)
        if snap.labels:
            self._pair(text, "labels", ", ".join(f"{k}={v}" for k, v in snap.labels.items()))
        hello = snap.hello
        if hello is not None:
            self._pair(text, "hostname", hello.hostname)
            self._pair(text, "driver", f"{hello.driver or '-'}  CUDA {hello.cuda or '-'}")
            simulated = "  (simulated GPUs)" if hello.simulated else ""
            self._pair(
                text,
                "helper",
                f"{hello.helper_version}, signals via {hello.signal_method}" + simulated,
            )
        self._pair(text, "GPUs", str(len(entry.gpus)))
        for i, note in enumerate(data_notes(snap)):
            self._pair(text, "bad data" if i == 0 else "", note, "warn")
        self._set_body(text)

    def on_resize(self) -> None:
        # A host's message is wrapped to the pane's width: wrap it anew.
        if self._host_shown is not None:
            self.show_host(*self._host_shown)

    def clear_detail(self) -> None:
        self._host_shown = None
        self._set_title("detail")
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
            ("util", fmt.percent(gpu.util), history.util if history else (), 0.0, 100.0),
            ("mem", fmt.percent(gpu.mem_pct), history.mem if history else (), 0.0, 100.0),
            ("temp", fmt.temperature(gpu.temp), history.temp if history else (), 20.0, 100.0),
            (
                "power",
                "-" if gpu.power is None else f"{gpu.power:.0f}W",
                history.power if history else (),
                0.0,
                power_top,
            ),
        )
        for label, now_text, values, low, high in rows:
            text.append(label.ljust(_LABEL_W), self._style("label"))
            text.append(now_text.rjust(5) + "  ")
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
            text.append(label + "\n", self._style("label"))
        width = max(16, pane_width - indent - 1)
        style = self._style(severity) if severity else Style()
        lines = textwrap.wrap(value, width, break_on_hyphens=False) or [""]
        for i, line in enumerate(lines):
            if indent:
                text.append((label if i == 0 else "").ljust(indent), self._style("label"))
            text.append(line, style)
            text.append("\n")

    def _pair(self, text: Text, label: str, value: str, severity: str | None = None) -> None:
        text.append(label.ljust(_LABEL_W), self._style("label"))
        text.append(value, self._style(severity) if severity else Style())
        text.append("\n")


def _opt(value: object) -> str:
    return "-" if value is None else str(value)
