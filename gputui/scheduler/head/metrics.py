"""``/metrics``: the fleet in dcgm-exporter's names, and the queue in gputui's own.

Per GPU, every reading the samples carry that dcgm-exporter has a name for, in its
units (``DCGM_FI_DEV_GPU_UTIL`` %, ``DCGM_FI_DEV_FB_USED`` MiB, ``DCGM_FI_DEV_POWER_USAGE``
W, ``DCGM_FI_DEV_XID_ERRORS`` the last Xid, ...; a reading the sample lacks has no
series, as with dcgm-exporter). Labels: ``gpu`` (index), ``UUID``, ``modelName``,
``Hostname`` and ``hostname`` (the name the host gives itself), ``instance`` (its name
in hosts.yaml: one per GPU host, for Grafana dashboard 12239 with ``honor_labels:
true``) and ``job``, ``user``, ``pool`` (empty, which Prometheus reads as absent,
unless a job or a claim holds the GPU: ``job`` is ``job:ID`` or ``claim:ID``).

dcgm-exporter's counters carry no ``_total``; prometheus_client's text writer adds
one to every counter, so they are exposed untyped, under their own names.

``FleetCollector`` is a prometheus_client ``Collector``; ``render`` writes the same
text as prometheus_client's ``generate_latest`` over it (the tests hold them equal)
far faster, the more so with a ``ScrapeCache`` kept between scrapes: each GPU's label
block is built once and kept while its labels stay the same, and each line is written
again only when its value changed (``metrics_cache``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gputui.scheduler.head.metrics_cache import ScrapeCache, tail
from gputui.scheduler.head.metrics_dcgm import GPU_FIELDS, GpuSeries
from gputui.scheduler.head.metrics_state import FleetView
from gputui.scheduler.head.metrics_text import GPU_LABELS, block, head, number

__all__ = ["FleetCollector", "ScrapeCache", "families", "number", "render", "render_parts"]


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    help: str
    kind: str
    """``gauge``, ``untyped`` or ``counter`` (whose samples end in ``_total``)."""
    samples: list[tuple[tuple[str, ...], float]]
    labels: tuple[str, ...] = GPU_LABELS


def _gpu_labels(view: FleetView, series: GpuSeries) -> tuple[str, ...]:
    held = view.queue.holders.get(series.uuid) if view.queue is not None else None
    facts = view.gpus.get(series.uuid)
    pool = (facts.pool if facts is not None else view.pools.get(series.host, "")) if held else ""
    return (
        str(series.gpu_index),
        series.uuid,
        series.model,
        series.hostname,
        series.hostname,
        series.host,
        f"{held.kind}:{held.id}" if held else "",
        held.user if held else "",
        pool,
    )


def families(view: FleetView) -> list[Family]:
    """Every family, its samples in host and GPU order."""
    series = list(GpuSeries.of_view(view))
    labels = [_gpu_labels(view, s) for s in series]
    out = []
    for spec in GPU_FIELDS:
        samples = [
            (row, float(v) + 0.0)
            for row, v in zip(labels, spec.values(series), strict=True)
            if v is not None
        ]
        if samples:
            out.append(Family(spec.name, spec.help, spec.kind, samples))
    for f in queue_families(view):  # (their figures are counts: ints)
        out.append(
            Family(f.name, f.help, f.kind, [(k, float(v) + 0.0) for k, v in f.samples], f.labels)
        )
    return out


def queue_families(view: FleetView) -> list[Family]:
    """The queue, the fences and drains, the accounting (gputui's own names)."""
    gpus = [g for g in view.gpus.values() if g.present]
    out = [
        Family("gputui_hosts", "GPU hosts in hosts.yaml.", "gauge", [((), len(view.hosts))], ()),
        Family(
            "gputui_hosts_up",
            "GPU hosts whose helper answers now.",
            "gauge",
            [((), sum(1 for h in view.hosts if h.live))],
            (),
        ),
        Family("gputui_gpus", "GPUs present in the inventory.", "gauge", [((), len(gpus))], ()),
        Family(
            "gputui_gpus_fenced",
            "GPUs the head fenced off for a hardware condition.",
            "gauge",
            [((), sum(1 for g in gpus if g.fenced))],
            (),
        ),
        Family(
            "gputui_gpus_drained",
            "GPUs an admin drained, by themselves or with their host.",
            "gauge",
            [((), sum(1 for g in gpus if g.drained or g.host in view.drained_hosts))],
            (),
        ),
        Family(
            "gputui_hosts_drained",
            "GPU hosts an admin drained.",
            "gauge",
            [((), len(view.drained_hosts))],
            (),
        ),
    ]
    q = view.queue
    if q is None:  # not read yet
        return out
    waiting = sorted(q.waiting.items())
    out += [
        Family(
            "gputui_jobs_waiting",
            "Jobs waiting (queued or held), by priority class and reason.",
            "gauge",
            [((klass, reason), n) for (klass, reason), n in waiting],
            ("class", "reason"),
        ),
        Family("gputui_jobs_running", "Jobs starting, running or stopping.", "gauge",
               [((), q.running)], ()),
        Family("gputui_claims_active", "Claims holding GPUs.", "gauge",
               [((), q.claims_active)], ()),
        Family("gputui_claims_waiting", "Claims waiting for GPUs.", "gauge",
               [((), q.claims_waiting)], ()),
        Family("gputui_gpus_allocated", "GPUs a job or a claim holds.", "gauge",
               [((), len(q.holders))], ()),
        Family("gputui_allocated_gpu_hours", "GPU-hours allocated to jobs and claims, all time"
               " (gputui report's alloc_gpu_h).", "counter", [((), q.alloc_gpu_h)], ()),
        Family("gputui_busy_gpu_hours", "GPU-hours with utilisation above zero, all time"
               " (gputui report's busy_gpu_h).", "counter", [((), q.busy_gpu_h)], ()),
        Family("gputui_energy_kwh", "Energy the GPUs drew, all time (gputui report's"
               " energy_kwh).", "counter", [((), q.energy_kwh)], ()),
    ]  # fmt: skip
    return out


class FleetCollector(Collector):
    """A prometheus_client collector over the fleet view ``view()`` returns."""

    def __init__(self, view: Callable[[], FleetView]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        for family in families(self._view()):
            kind = "unknown" if family.kind == "untyped" else family.kind
            metric = Metric(family.name, family.help, kind)
            sample_name = family.name + ("_total" if kind == "counter" else "")
            for values, value in family.samples:
                metric.add_sample(sample_name, dict(zip(family.labels, values, strict=True)), value)
            yield metric


_HEADS = [head(spec.name, spec.help, spec.kind) for spec in GPU_FIELDS]


def render(view: FleetView, cache: ScrapeCache | None = None) -> bytes:
    """The text exposition of ``view``: byte for byte ``generate_latest`` of a registry
    holding ``FleetCollector`` over it (a ``cache`` kept between scrapes makes the
    next one write again only what changed)."""
    return b"".join(render_parts(view, cache))


def render_parts(view: FleetView, cache: ScrapeCache | None = None) -> list[bytes]:
    """``render``'s text in pieces (one per family: sent as they are, never joined)."""
    cache = cache if cache is not None else ScrapeCache()
    parts = list(cache.bodies(view, _HEADS))
    tails = cache.tails
    for family in queue_families(view):
        name = family.name + ("_total" if family.kind == "counter" else "")
        parts.append(head(name, family.help, family.kind))
        parts.append(
            b"".join(
                (name + block(family.labels, k)).encode() + tail(v, tails)
                for k, v in family.samples
            )
        )
    return parts
