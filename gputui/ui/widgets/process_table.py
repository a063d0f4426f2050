"""The processes on the selected GPU (or host): a small table with a row cursor.

Flat (the helper's order), or as a tree per GPU (``as_tree``): each process under its
parents, as htop's tree view shows it (``gputui.ui.widgets.process_tree``)."""

from __future__ import annotations

from collections.abc import Set

from rich.text import Text
from textual.events import Resize

from gputui.common.i18n import N_, _
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuView
from gputui.ui.widgets.process_tree import CONTAINER_SHORT, TreeLine, has_tree, tree_lines
from gputui.ui.widgets.rows import RowTable
from gputui.ui.widgets.titles import set_border_title
from gputui.wire.messages import ProcessSample

# (title, width); COMMAND takes what is left of the table's width.
_GPU = ("GPU", 3)
_PID = ("PID", 7)
_MEM = (N_("MEM"), 5)
_AGE = (N_("AGE"), 5)
_USER_W = 8
_NARROW_USER_W = 6
_CONTAINER_W = CONTAINER_SHORT
_COMMAND_W = 24
"""Below this the command gives way to nothing: AGE goes, then USER narrows."""
_MIN_COMMAND_W = 12
_PAD = 2  # a DataTable cell's padding, one each side
NEEDS_NEWER_HELPER = N_("tree: needs a newer helper")
"""Said under the table when a tree is asked for and no process came with its parents."""


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
        columns = [*lead, _PID, (N_("USER"), user_w), _MEM, *([_AGE] if age else [])]
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
        self.as_tree = False
        """Each GPU's processes as a tree under their parents (``set_tree``)."""
        self._title = "processes"
        self._entries: list[tuple[GpuView, ProcessSample]] = []
        self._lines: list[TreeLine] = []
        """The table's lines: a (GPU, process) each, or a parent line in a tree."""
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
        self._title = title if entries else _("no {title}").format(title=title)  # says so
        set_border_title(self, self._titled())  # the border line only, not every row
        marks = frozenset(flagged)
        key = (
            int(now // 10),
            marks,
            *((gpu.uuid, process) for gpu, process in entries),
        )
        if self.as_tree:  # the parents shape only the tree: flat, they are not compared
            key += tuple({id(gpu.parents): gpu.parents for gpu, _ in entries}.values())
        if key == self._shown:
            self._entries = list(entries)  # the same rows; newest parents for a tree later
            return
        self._shown = key
        self._now = now
        self._flagged = marks
        keep = self._current()
        self._entries = list(entries)
        self._fill(keep)

    def on_resize(self, event: Resize) -> None:
        self._fill(self._current())

    def set_tree(self, tree: bool) -> None:
        """Show a tree per GPU (parents, container) or the flat list; the cursor stays."""
        if tree != self.as_tree:
            self.as_tree = tree
            set_border_title(self, self._titled())
            self._fill(self._current())

    def _titled(self) -> str:
        return _("{title} · tree").format(title=self._title) if self.as_tree else self._title

    def _current(self) -> tuple[str, int] | None:
        """(GPU uuid, pid) of the line under the cursor, a parent's line included."""
        if not self._lines:
            return None
        line = self._lines[max(0, min(self.cursor_row, len(self._lines) - 1))]
        return line.gpu.uuid, line.pid

    def _fill(self, keep: tuple[str, int] | None) -> None:
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
                self.add_column(_(title), width=column_w)
            self.add_column(_("COMMAND"), width=command_w)
            if containers:
                self.add_column(_("CONTAINER"), width=_CONTAINER_W)
        else:
            self.clear()
        tree = self.as_tree and has_tree(self._entries)
        note = _(NEEDS_NEWER_HELPER) if self.as_tree and self._entries and not tree else None
        if note != self.border_subtitle:
            self.border_subtitle = note
        if tree:
            self._lines = tree_lines(self._entries)
        else:
            self._lines = [TreeLine(g, p.pid, "", p.command, p) for g, p in self._entries]
        cursor = 0
        for i, line in enumerate(self._lines):
            gpu, process = line.gpu, line.process
            cells = [Text(str(gpu.index), justify="right")] if gpus else []
            if process is None:  # a parent of GPU processes: its pid and name only
                cells += [Text(str(line.pid), style="dim", justify="right"), Text(""), Text("")]
                cells += [Text("")] if ages else []
                label = line.prefix + (line.name or "-")
                cells.append(Text(fmt.truncate(label, command_w), style="dim", no_wrap=True))
                cells += [Text("")] if containers else []
                self.add_row(*cells, key=f"{gpu.uuid}:^{line.pid}:{i}")
                cursor = i if keep == (gpu.uuid, line.pid) else cursor
                continue
            start = process.start_time
            user = process.user or (str(process.uid) if process.uid is not None else "-")
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
            command = process.command or "-"
            if tree and process.container and not containers:  # no room for the column
                command = f"[{process.container[:CONTAINER_SHORT]}] {command}"
            label = line.prefix + command
            cells.append(Text(fmt.truncate(label, command_w), no_wrap=True))
            if containers:
                cells.append(Text(fmt.truncate(process.container or "-", _CONTAINER_W)))
            self.add_row(*cells, key=f"{gpu.uuid}:{process.pid}:{i}")
            cursor = i if keep == (gpu.uuid, process.pid) else cursor
        if self._lines:
            self.move_cursor(row=cursor, animate=False)

    @property
    def selected(self) -> tuple[GpuView, ProcessSample] | None:
        """The (GPU, process) under the cursor; None when the table is empty or the
        cursor is on a tree's parent line (a process that holds nothing on the GPU)."""
        if not self._lines:
            return None
        line = self._lines[max(0, min(self.cursor_row, len(self._lines) - 1))]
        return None if line.process is None else (line.gpu, line.process)
