"""The processes on the selected GPU (or host): a small table with a row cursor."""

from __future__ import annotations

from rich.text import Text
from textual.events import Resize
from textual.widgets import DataTable

from gputui.protocol import ProcessSample
from gputui.ui import format as fmt
from gputui.ui.model import GpuView

# (title, width); COMMAND takes what is left of the table's width.
_GPU = ("GPU", 3)
_FIXED = (("PID", 7), ("USER", 8), ("MEM", 6))
_AGE = ("AGE", 5)
_CONTAINER_W = 12
_MIN_COMMAND_W = 12


class ProcessTable(DataTable[Text]):
    """Each row is one (GPU, process); ``selected`` gives the pair under the cursor."""

    DEFAULT_CSS = """
    ProcessTable {
        height: 1fr;
        overflow-x: hidden;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, show_cursor=True)
        self._entries: list[tuple[GpuView, ProcessSample]] = []
        self._shown: tuple[object, ...] | None = None
        self._layout: tuple[int, bool, bool, bool] | None = None
        self._now = 0.0

    def show(self, entries: list[tuple[GpuView, ProcessSample]], now: float) -> None:
        """Show these processes; keep the cursor on the same process when it is still there."""
        key = (int(now // 10), *((gpu.uuid, process) for gpu, process in entries))
        if key == self._shown:
            return
        self._shown = key
        self._now = now
        selected = self.selected
        self._entries = list(entries)
        self._fill(selected)

    def on_resize(self, event: Resize) -> None:
        self._fill(self.selected)

    def _fill(self, selected: tuple[GpuView, ProcessSample] | None) -> None:
        gpus = len({gpu.uuid for gpu, _ in self._entries}) > 1
        width = self.size.width
        containers = width >= 90 and any(process.container for _, process in self._entries)
        ages = width >= 44
        columns = [_GPU] * gpus + list(_FIXED) + [_AGE] * ages
        fixed = sum(w + 2 for _, w in columns) + (_CONTAINER_W + 2) * containers
        command_w = max(_MIN_COMMAND_W, width - fixed - 2)
        layout = (command_w, gpus, ages, containers)
        if layout != self._layout:
            self._layout = layout
            self.clear(columns=True)
            for title, column_w in columns:
                self.add_column(title, width=column_w)
            self.add_column("COMMAND", width=command_w)
            if containers:
                self.add_column("CONTAINER", width=_CONTAINER_W)
        else:
            self.clear()
        cursor = 0
        for i, (gpu, process) in enumerate(self._entries):
            start = process.start_time
            user = process.user or (str(process.uid) if process.uid is not None else "-")
            cells = [Text(str(gpu.index), justify="right")] if gpus else []
            cells += [
                Text(str(process.pid), justify="right"),
                Text(fmt.truncate(user, 8)),
                Text(fmt.mib(process.gpu_mem_mib), justify="right"),
            ]
            if ages:
                age = fmt.duration(None if start is None else self._now - start)
                cells.append(Text(age, justify="right"))
            cells.append(Text(fmt.truncate(process.command or "-", command_w), no_wrap=True))
            if containers:
                cells.append(Text(process.container[:_CONTAINER_W] if process.container else "-"))
            self.add_row(*cells, key=f"{gpu.uuid}:{process.pid}:{i}")
            if selected is not None and selected[0].uuid == gpu.uuid:
                cursor = i if selected[1].pid == process.pid else cursor
        if self._entries:
            self.move_cursor(row=cursor, animate=False)

    @property
    def selected(self) -> tuple[GpuView, ProcessSample] | None:
        """The (GPU, process) under the cursor, or None when the table is empty."""
        if not self._entries:
            return None
        row = max(0, min(self.cursor_row, len(self._entries) - 1))
        return self._entries[row]
