"""What the main screen's side panes say about the grid's selected row: the process
table (the GPU's processes, or every one on the host) and the detail pane (a GPU's
history, events, flags and holder, or the host's state).

The screen decides what is selected and when the panes follow (a key, new data, a
tick); what they then show is decided here, from the model alone.
"""

from __future__ import annotations

from textual.widget import Widget

from gputui.common.i18n import _
from gputui.ui.gpu_view import GpuRow, GpuView, HostRow, Row
from gputui.ui.model import ClusterModel
from gputui.ui.widgets.detail import DetailPane
from gputui.ui.widgets.grid_render import held_text
from gputui.ui.widgets.process_table import ProcessTable


def show_selection(
    model: ClusterModel,
    row: Row | None,
    now: float,
    *,
    table: ProcessTable,
    detail: DetailPane,
    side: Widget,
    scheduler: bool,
) -> None:
    """Fill ``table`` and ``detail`` (in ``side``) for ``row``; ``None``: empty them.

    ``scheduler``: a head is configured, so the detail says who holds the GPU."""
    if row is None:
        table.show([], now, _("processes"))
        detail.clear_detail()
        return
    entry = model.hosts.get(row.host)
    if entry is None:
        return
    # A host that is down has nothing running to list: its detail (a host key's
    # two fingerprints, say) gets the whole width below the grid.
    down = isinstance(row, HostRow) and entry.snapshot.status.is_problem
    side.set_class(down, "-host-down")
    if isinstance(row, GpuRow):
        gpu = model.gpu(row)
        if gpu is None:
            return
        table.show(
            [(gpu, p) for p in gpu.processes],
            now,
            _("processes on {host} GPU {index}").format(host=row.host, index=row.index),
            flagged=model.flagged([gpu]),
        )
        detail.show_gpu(
            gpu,
            entry,
            model.history(row),
            model.events(row),
            now,
            flags=model.flags(gpu, now),
            held=held_detail(model, gpu, now) if scheduler else None,
            flagged=[f.line(now) for f in model.owner_flags.get(gpu.uuid, ())],
        )
    else:
        processes = [(g, p) for g in entry.gpus.values() for p in g.processes]
        flagged = model.flagged(entry.gpus.values())
        title = _("processes on {host}").format(host=row.host)
        table.show(processes, now, title, flagged=flagged)
        detail.show_host(entry, now)


def held_detail(model: ClusterModel, gpu: GpuView, now: float) -> str:
    """The detail pane's HELD line: who holds ``gpu`` and since when, or nobody."""
    holder = model.holders.get(gpu.uuid)
    if holder is None:
        return _("nobody (free to claim: c)")
    text = held_text(holder, gpu, now, long=True)
    return text + ("  " + _("({name})").format(name=holder.name) if holder.name else "")
