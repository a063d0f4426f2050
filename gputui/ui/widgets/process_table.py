"""The processes on the selected GPU (or host): a small table with a row cursor."""

from __future__ import annotations

from collections.abc import Set

from rich.text import Text
from textual.events import Resize

from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuView
from gputui.ui.widgets.rows import RowTable
from gputui.ui.widgets.titles import set_border_title
from gputui.wire.messages import ProcessSample

# (title, width); COMMAND takes what is left of the table's width.
_GPU = ("GPU", 3)
_PID = ("PID", 7)
_MEM = ("MEM", 5)
_AGE = ("AGE", 5)
_USER_W = 8
_NARROW_USER_W = 6
_CONTAINER_W = 12
_COMMAND_W = 24
"""Below this the command gives way to nothing: AGE goes, then USER narrows."""
_MIN_COMMAND_W = 12
_PAD = 2  # a DataTable cell's padding, one each side


def plan_columns(
    width: int, *, gpus: bool, containers: bool
) -> tuple[list[tuple[str, int]], int, bool]:
    """The columns before COMMAND, COMMAND's width, and whether CONTAINER fits.

    The command is what a person reads to recognise a process, so on a narrow
    screen the age column goes first and the user column narrows before the
    command is cut short.
    """
    containers = containers and width >= 90

    def command_w(columns: list[tuple[str, int]]) -> int:
        fixed = sum(w + _PAD for _, w in columns) + (_CONTAINER_W + _PAD) * containers
        return width - fixed - _PAD

    lead = [_GPU] if gpus else []
    for user_w, age in ((_USER_W, True), (_USER_W, False), (_NARROW_USER_W, False)):
        columns = [*lead, _PID, ("USER", user_w), _MEM, *([_AGE] if age else [])]
        if command_w(columns) >= _COMMAND_W:
            break
    return columns, max(_MIN_COMMAND_W, command_w(columns)), containers


class ProcessTable(RowTable[Text]):
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
        self._layout: tuple[object, ...] | None = None
        self._now = 0.0
        self._flagged: frozenset[tuple[str, int]] = frozenset()

    def show(
        self,
        entries: list[tuple[GpuView, ProcessSample]],
        now: float,
        title: str = "processes",
        *,
        flagged: Set[tuple[str, int]] = frozenset(),
    ) -> None:
        """Show these processes; keep the cursor on the same process when it is still there.

        ``flagged``: (GPU uuid, pid) of the processes the head flags (its owner holds
        no job or claim there): their PID is marked ``!`` (the detail pane says why).
        """
        # The border line only, not every row; an empty list says so there.
        set_border_title(self, title if entries else f"no {title}")
        marks = frozenset(flagged)
        key = (int(now // 10), marks, *((gpu.uuid, process) for gpu, process in entries))
        if key == self._shown:
            return
        self._shown = key
        self._now = now
        self._flagged = marks
        selected = self.selected
        self._entries = list(entries)
        self._fill(selected)

    def on_resize(self, event: Resize) -> None:
        self._fill(self.selected)

    def _fill(self, selected: tuple[GpuView, ProcessSample] | None) -> None:
        gpus = len({gpu.uuid for gpu, _ in self._entries}) > 1
        columns, command_w, containers = plan_columns(
            self.size.width,
            gpus=gpus,
            containers=any(process.container for _, process in self._entries),
        )
        user_w = dict(columns)["USER"]
        ages = _AGE in columns
        layout = (tuple(columns), command_w, containers)
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
                Text(
                    ("!" if (gpu.uuid, process.pid) in self._flagged else "") + str(process.pid),
                    justify="right",
                ),
                Text(fmt.truncate(user, user_w)),
                Text(fmt.mib(process.gpu_mem_mib), justify="right"),
            ]
            if ages:
                age = fmt.duration(None if start is None else self._now - start)
                cells.append(Text(age, justify="right"))
            cells.append(Text(fmt.truncate(process.command or "-", command_w), no_wrap=True))
            if containers:
                cells.append(Text(fmt.truncate(process.container or "-", _CONTAINER_W)))
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
