"""Which GPUs a claim of more than one GPU takes, shown before it is sent.

A claim for N > 1 GPUs is planned here from what the console knows: the head's
GPUs (free, not drained or fenced, on a live host, of the pool and host asked
for) and the console's own samples (the model, processes, memory in use). The
cleanest cards come first: no process, then the least memory in use. The plan
names the GPUs, the question shows them, and the claim sent names them too
(``gpu_refs``), so what is taken is what was shown; if one went meanwhile the
head refuses in its own words and nothing is taken. When no host has N free,
the plan is empty: the claim can only wait in line, and the question says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from gputui.common.gpu_label import LABEL_MAX, model_label
from gputui.common.i18n import _, ngettext
from gputui.ui.gpu_view import GpuRow
from gputui.ui.head.view import HeadGpu, HeadView
from gputui.ui.model import ClusterModel

SHOWN = 8
"""GPUs listed one per line in the question (it fits 80x24); more are counted."""
QUESTION_W = 66
"""A line of the question's room in its dialog at 80 columns: a GPU's line (index,
UUID, the model's short label, busy) fits it, never leaving ``(busy)`` on a line of
its own."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One GPU of the plan."""

    gpu: HeadGpu
    model: str
    processes: int
    mem_used_mib: int
    label: str | None = None
    """The card's short label as the grid shows it (``H100-80G``: with its memory)."""

    @property
    def rank(self) -> tuple[int, int, int]:
        return (self.processes > 0, self.mem_used_mib, self.gpu.index)


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """The GPUs a claim of ``count`` takes now (empty: none fit; it waits in line)."""

    count: int
    picks: tuple[Pick, ...]
    constraints: tuple[tuple[str, str], ...] = ()
    """The same constraints (``host``, ``pool``, ``model``) and their values, in that
    order: ``where_text`` says them in the reader's language."""
    never: bool = False
    """No host the constraints allow has ``count`` GPUs at all, free or not (or no
    host is allowed): waiting cannot help, and the head refuses it in its own words,
    so it is sent without the question."""

    def where_text(self) -> str:
        """The constraints in words (``on gpu01 in pool a100 model a100``), or ""."""
        said = {
            "host": _("on {value}"),
            "pool": _("in pool {value}"),
            "model": _("model {value}"),
        }
        return " ".join(said[kind].format(value=value) for kind, value in self.constraints)

    def where_after(self) -> str:
        """``where_text`` to follow a count (`` on gpu01 in pool a100``), or ""."""
        text = self.where_text()
        return f" {text}" if text else ""

    @property
    def host(self) -> str | None:
        return self.picks[0].gpu.host if self.picks else None

    @property
    def label(self) -> str:
        """The confirming button's words."""
        if not self.picks:
            return _("Wait in line")
        return ngettext("Claim {n} GPU", "Claim {n} GPUs", self.count).format(n=self.count)

    def cannot_wait(self, args: dict[str, Any]) -> bool:
        """Nothing fits now and the claim may not wait in line: it is not asked."""
        return not self.picks and not args.get("wait", True)

    def request(self, args: dict[str, Any]) -> dict[str, Any]:
        """The claim's arguments: the planned GPUs by UUID, taken now or refused."""
        if not self.picks:
            return args
        keep = {k: v for k, v in args.items() if k not in ("gpus", "pool", "model", "host")}
        return {**keep, "gpu_refs": [p.gpu.uuid for p in self.picks], "wait": False}

    def question(self, args: dict[str, Any]) -> Text:
        """What the confirmation asks: which GPUs on which host, and for how long."""
        text = Text()
        if not self.picks:
            where = self.where_text()
            n = self.count
            none = (
                ngettext(
                    "No host has {n} free GPU {where} now.",
                    "No host has {n} free GPUs {where} now.",
                    n,
                )
                if where
                else ngettext("No host has {n} free GPU now.", "No host has {n} free GPUs now.", n)
            )
            text.append(none.format(n=n, where=where) + "\n", style="bold")
            text.append(
                ngettext(
                    "The claim waits in line and takes the first {n} that comes free on one host.",
                    "The claim waits in line and takes the first {n} that come free on one host.",
                    n,
                ).format(n=n)
            )
        else:
            indices = ", ".join(str(p.gpu.index) for p in self.picks)
            said = ngettext(
                "Claim {n} GPU on {host}: GPU {indices}",
                "Claim {n} GPUs on {host}: GPU {indices}",
                self.count,
            )
            text.append(
                said.format(n=self.count, host=self.host, indices=indices) + "\n", style="bold"
            )
            for pick in self.picks[:SHOWN]:
                busy = " " + _("(busy)") if pick.processes else ""
                model = pick.label or (model_label(pick.model) if pick.model else "?")
                text.append(f"  {pick.gpu.index:>2}  {pick.gpu.uuid}  {model:<{LABEL_MAX}}{busy}\n")
            if len(self.picks) > SHOWN:
                more = _("… and {n} more").format(n=len(self.picks) - SHOWN)
                text.append(f"  {more}\n")
        duration = args.get("duration_s")
        how_long = (
            _("For {duration}").format(duration=_duration(duration))
            if duration
            else _("Until released (u)")
        )
        if args.get("note"):
            how_long = _("{how_long}; note: {note}").format(how_long=how_long, note=args["note"])
        ask = _("{how_long}. Take them? y/N") if self.picks else _("{how_long}. Wait in line? y/N")
        text.append("\n" + ask.format(how_long=how_long))
        return text


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return _("{minutes} min").format(minutes=max(1, minutes))
    hours, minutes = divmod(minutes, 60)
    if minutes:
        return _("{hours} h {minutes} min").format(hours=hours, minutes=f"{minutes:02d}")
    return _("{hours} h").format(hours=hours)


def plan_claim(view: HeadView, model: ClusterModel, args: dict[str, Any]) -> ClaimPlan:
    """The GPUs a claim with ``args`` (the form's: ``gpus``, ``pool``, ``model``,
    ``host``) would take now: the best host's cleanest free cards."""
    count = int(args.get("gpus") or 1)
    pool, want_model, host = args.get("pool"), args.get("model"), args.get("host")
    constraints = tuple(
        (kind, str(value))
        for kind, value in (("host", host), ("pool", pool), ("model", want_model))
        if value
    )
    by_host: dict[str, list[Pick]] = defaultdict(list)
    cards: dict[str, int] = defaultdict(int)
    """Host -> its GPUs the constraints allow, whoever holds them, whatever their state."""
    for gpu in view.gpus:
        if gpu.index < 0 or (host and gpu.host != host) or (pool and gpu.pool != pool):
            continue
        seen = model.gpu(GpuRow(gpu.host, gpu.index))
        name = seen.model if seen is not None else ""
        matches = not want_model or str(want_model).lower() in name.lower()
        if not matches and seen is not None:
            continue  # another model
        cards[gpu.host] += 1  # (a card never seen may be the model asked for)
        if not matches or gpu.holder is not None or gpu.state != "ok":
            continue
        if not view.hosts_live.get(gpu.host, True):
            continue
        processes = len(seen.processes) if seen is not None else 0
        used = (seen.mem_used if seen is not None else None) or 0
        label = seen.label if seen is not None else None
        by_host[gpu.host].append(Pick(gpu, name, processes, int(used), label))
    best: tuple[Pick, ...] = ()
    best_key: tuple[Any, ...] | None = None
    for name, picks in by_host.items():
        if len(picks) < count:
            continue
        chosen = tuple(sorted(picks, key=lambda p: p.rank)[:count])
        key = (sum(p.processes > 0 for p in chosen), sum(p.mem_used_mib for p in chosen), name)
        if best_key is None or key < best_key:
            best, best_key = chosen, key
    never = not best and max(cards.values(), default=0) < count
    taken = tuple(sorted(best, key=lambda p: p.gpu.index))
    return ClaimPlan(count, taken, constraints, never)
