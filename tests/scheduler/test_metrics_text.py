"""The text of ``/metrics``: ``render`` writes byte for byte what prometheus_client's
``generate_latest`` writes over ``FleetCollector``, whatever the hosts call themselves
and their cards (hostile label values are escaped and come back whole through
prometheus_client's parser), and its label cache never serves a stale label.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.metrics import FleetCollector, ScrapeCache, number, render
from gputui.scheduler.head.metrics_state import (
    FleetView,
    Holding,
    HostView,
    QueueFacts,
    link_totals,
)
from gputui.wire.health import NvLinkSample
from gputui.wire.messages import GpuSample, Sample

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=30
) | st.sampled_from(['a"b', "a\\b", "a\nb", '\\"', "\\n", "}", '{x="1"}', "é✓", " "])
COUNT = st.none() | st.integers(min_value=0, max_value=2**40)
MIB = st.none() | st.integers(min_value=0, max_value=2**24)


def facts(uuid: str, host: str, index: int, model: str) -> GpuFacts:
    return GpuFacts(
        uuid=uuid, host=host, index=index, model=model, memory_mib=80, pool="p",
        drained_by=None, drain_reason=None, drained_at=None, fence_code=None,
        fence_reason=None, fenced_at=None, fence_clears=None, fence_waived=None,
        fence_waived_at=None, present=True,
    )  # fmt: skip


@st.composite
def fleets(draw: st.DrawFn) -> FleetView:
    hosts, gpus, holders, xids, energy, links = [], {}, {}, {}, {}, {}
    for h in range(draw(st.integers(1, 3))):
        name = f"host{h}"
        samples, readings = [], {}
        for i in range(draw(st.integers(0, 3))):
            drawn = f"GPU-{h}-{i}-" + draw(TEXT)
            samples.append(
                GpuSample(
                    index=i,
                    uuid=drawn,
                    util_gpu=draw(st.none() | st.integers(0, 100)),
                    mem_used_mib=draw(MIB),
                    mem_total_mib=draw(MIB),
                    power_w=draw(st.none() | st.floats(0, 5000, allow_nan=False)),
                    clock_sm_mhz=draw(st.none() | st.integers(0, 5000)),
                    ecc_corrected=draw(COUNT),
                )
            )
            uuid = samples[-1].uuid  # (as the wire's model keeps it)
            if draw(st.booleans()):
                reading = GpuSample(
                    index=i,
                    uuid=uuid,
                    health_read=True,
                    remapped_correctable=draw(COUNT),
                    remap_failed=draw(st.none() | st.booleans()),
                    nvlinks=tuple(
                        NvLinkSample(link=n, replay_errors=draw(COUNT))
                        for n in range(draw(st.integers(0, 3)))
                    ),
                )
                readings[uuid] = reading
                links[uuid] = link_totals(reading)
            gpus[uuid] = facts(uuid, name, i, draw(TEXT))
            if draw(st.booleans()):
                holders[uuid] = Holding(draw(st.sampled_from(["job", "claim"])), i, draw(TEXT))
            if draw(st.booleans()):
                xids[uuid] = draw(st.integers(0, 2**31 - 1))
            if draw(st.booleans()):
                energy[uuid] = draw(st.floats(0, 1e15, allow_nan=False))
        sample = Sample(seq=1, gpus=tuple(samples))
        hosts.append(HostView(name, draw(TEXT), draw(st.booleans()), sample, readings))
    waiting = draw(st.dictionaries(st.tuples(TEXT, TEXT), st.integers(1, 100), max_size=3))
    queue = QueueFacts(
        at=0.0, waiting=waiting, running=1, claims_active=2, claims_waiting=0,
        holders=holders, alloc_gpu_h=1.5, busy_gpu_h=0.25, energy_kwh=1e-7,
    )  # fmt: skip
    return FleetView(
        hosts=tuple(hosts),
        gpus=gpus,
        drained_hosts=frozenset(),
        last_xid=xids,
        energy_mj=energy,
        queue=draw(st.none() | st.just(queue)),
        links=links,
    )


def library_text(view: FleetView) -> bytes:
    registry = CollectorRegistry()
    registry.register(FleetCollector(lambda: view))
    return generate_latest(registry)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_render_is_generate_latest_and_labels_round_trip(view: FleetView) -> None:
    text = render(view)
    assert text == library_text(view)
    parsed = {f.name: f.samples for f in text_string_to_metric_families(text.decode())}
    shown = {s.labels["UUID"]: s.labels for s in parsed.get("DCGM_FI_DEV_SM_CLOCK", [])}
    held = view.queue.holders if view.queue is not None else {}
    for host in view.hosts:
        assert host.sample is not None
        for gpu in host.sample.gpus:
            if not host.live or gpu.clock_sm_mhz is None:
                assert gpu.uuid not in shown
                continue
            labels = shown[gpu.uuid]
            assert labels["Hostname"] == labels["hostname"] == host.hostname
            assert labels["instance"] == host.name
            assert labels["modelName"] == view.gpus[gpu.uuid].model
            holder = held.get(gpu.uuid)
            assert labels["user"] == (holder.user if holder else "")
            assert labels["job"] == (f"{holder.kind}:{holder.id}" if holder else "")


@settings(max_examples=60, deadline=None)
@given(fleets(), st.data())
def test_the_label_cache_follows_the_holders(view: FleetView, data: st.DataObject) -> None:
    cache = ScrapeCache()
    assert render(view, cache) == library_text(view)
    if view.queue is None:
        return
    taken = data.draw(st.sets(st.sampled_from(sorted(view.gpus) or ["none"])))
    holders = {u: Holding("job", 7, "someone") for u in taken if u in view.gpus}
    moved = replace(view, queue=replace(view.queue, holders=holders))
    assert render(moved, cache) == library_text(moved)
    assert render(view, cache) == library_text(view)


@given(st.floats(allow_nan=True) | st.integers(-(2**60), 2**60) | st.booleans())
def test_numbers_as_prometheus_client_writes_them(value: float) -> None:
    from prometheus_client.utils import floatToGoString

    assert number(value) == floatToGoString(value)


def changed(view: FleetView, data: st.DataObject) -> FleetView:
    """``view`` a scrape later: some readings changed (to -0.0 too), some hosts gone,
    went down or came back, some GPUs taken, freed or dropped from their sample."""
    hosts = []
    for host in view.hosts:
        assert host.sample is not None
        if data.draw(st.integers(0, 5)) == 0:
            continue  # gone from hosts.yaml
        gpus = list(host.sample.gpus)
        if gpus and data.draw(st.integers(0, 4)) == 0:
            gpus.pop(data.draw(st.integers(0, len(gpus) - 1)))
        gpus = [
            dataclasses.replace(
                g,
                util_gpu=data.draw(st.none() | st.integers(0, 100)),
                power_w=data.draw(st.none() | st.sampled_from([-0.0, 0.0, 1.5, 300.0])),
            )
            if data.draw(st.booleans())
            else g
            for g in gpus
        ]
        sample = host.sample if data.draw(st.booleans()) else Sample(seq=2, gpus=tuple(gpus))
        readings = {u: r for u, r in host.readings.items() if data.draw(st.booleans())}
        live = host.live if data.draw(st.booleans()) else not host.live
        hosts.append(replace(host, sample=sample, readings=readings, live=live))
    uuids = sorted(view.gpus)
    pick = st.sets(st.sampled_from(uuids)) if uuids else st.just(set[str]())
    energy = {u: e + data.draw(st.sampled_from([0.0, 1.0, 1e6])) for u, e in view.energy_mj.items()}
    xids = dict.fromkeys(data.draw(pick), 43)
    queue = view.queue
    if queue is not None:
        holders = {u: Holding("claim", 3, "bob") for u in data.draw(pick)}
        queue = replace(queue, holders=holders)
    return replace(
        view, hosts=tuple(hosts), energy_mj=energy, last_xid=xids, queue=queue,
        links=dict.fromkeys(data.draw(pick), (1, None, 2, 0)),
    )  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.data())
def test_a_kept_cache_writes_what_changed_between_scrapes(
    view: FleetView, data: st.DataObject
) -> None:
    cache = ScrapeCache()
    for _ in range(4):
        assert render(view, cache) == library_text(view)
        view = changed(view, data)
    assert render(view, cache) == library_text(view)


def test_the_cache_drops_the_hosts_that_left() -> None:
    gpu = GpuSample(index=0, uuid="GPU-a", util_gpu=5)
    one = HostView("a", "a", True, Sample(seq=1, gpus=(gpu,)), {})
    two = HostView("b", "b", True, Sample(seq=1, gpus=(replace_uuid(gpu, "GPU-b"),)), {})
    view = FleetView(
        hosts=(one, two), gpus={}, drained_hosts=frozenset(), last_xid={}, energy_mj={}
    )
    cache = ScrapeCache()
    render(view, cache)
    assert len(cache) == 2
    fewer = replace(view, hosts=(two, replace(one, live=False)))
    assert render(fewer, cache) == library_text(fewer)
    assert len(cache) == 1


def replace_uuid(gpu: GpuSample, uuid: str) -> GpuSample:
    return dataclasses.replace(gpu, uuid=uuid)


def test_minus_zero_is_written_as_zero_by_both_writers() -> None:
    gpu = GpuSample(index=0, uuid="GPU-a", power_w=-0.0, util_gpu=0)
    host = HostView("a", "a", True, Sample(seq=1, gpus=(gpu,)), {})
    view = FleetView(hosts=(host,), gpus={}, drained_hosts=frozenset(), last_xid={}, energy_mj={})
    assert b"DCGM_FI_DEV_POWER_USAGE{" in render(view)
    assert render(view) == library_text(view)
    assert b"-0.0" not in render(view)
