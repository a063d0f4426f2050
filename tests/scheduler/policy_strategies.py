"""Hypothesis strategies for whole cluster views: hosts, running work, a line of requests."""

from __future__ import annotations

from hypothesis import strategies as st

from gputui.scheduler.policy.model import ClusterView, GpuSlot, Running, Want

NOW = 100_000.0
MODELS = ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 3090")


@st.composite
def views(draw: st.DrawFn, max_hosts: int = 5, max_waiting: int = 24) -> ClusterView:
    n_hosts = draw(st.integers(1, max_hosts))
    gpus: list[GpuSlot] = []
    for h in range(n_hosts):
        host = f"h{h}"
        pool = draw(st.sampled_from(("a100", "3090")))
        mixed = draw(st.booleans()) and draw(st.booleans())
        for i in range(draw(st.integers(1, 8))):
            model = MODELS[0] if pool == "a100" else MODELS[1]
            if mixed and i % 2:
                model = MODELS[1 - MODELS.index(model)]
            healthy = not (draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()))
            gpus.append(
                GpuSlot(
                    uuid=f"GPU-{h}-{i}",
                    host=host,
                    index=i,
                    pool=pool,
                    model=model,
                    drained=draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()),
                    healthy=healthy,
                    # A fenced GPU is never healthy; an unhealthy one is fenced or down.
                    fenced=not healthy and draw(st.booleans()),
                    # A card placement avoids (phantom memory, a rogue process ...).
                    last=draw(st.booleans()) and draw(st.booleans()),
                )
            )
    # Running work on some of the GPUs.
    running: list[Running] = []
    busy: set[str] = set()
    next_id = 1
    for host in sorted({g.host for g in gpus}):
        slots = [g for g in gpus if g.host == host]
        i = 0
        while i < len(slots):
            if not draw(st.booleans()):
                i += 1
                continue
            size = draw(st.integers(1, max(1, min(4, len(slots) - i))))
            held = slots[i : i + size]
            i += size
            kind = draw(st.sampled_from(("job", "job", "job", "claim")))
            started = NOW - draw(st.floats(0, 20_000, allow_nan=False))
            limit = draw(st.one_of(st.none(), st.floats(60, 40_000, allow_nan=False)))
            running.append(
                Running(
                    kind=kind,
                    id=next_id,
                    host=host,
                    gpus=tuple(g.uuid for g in held),
                    rank=draw(st.integers(0, 3)),
                    preemptible=kind == "job" and draw(st.booleans()),
                    over_quota=kind == "job" and draw(st.booleans()) and draw(st.booleans()),
                    started_at=started,
                    ends_at=None if limit is None else max(NOW + 1, started + limit),
                    stopping=kind == "job" and draw(st.booleans()) and draw(st.booleans()),
                )
            )
            busy.update(g.uuid for g in held)
            next_id += 1
    gpus = [
        GpuSlot(
            g.uuid,
            g.host,
            g.index,
            g.pool,
            g.model,
            g.drained,
            g.healthy,
            g.uuid in busy,
            g.fenced,
            g.last,
        )
        for g in gpus
    ]
    waiting: list[Want] = []
    for n in range(draw(st.integers(0, max_waiting))):
        kind = draw(st.sampled_from(("job", "job", "job", "claim")))
        named: tuple[str, ...] = ()
        if kind == "claim" and draw(st.booleans()) and draw(st.booleans()):
            host = draw(st.sampled_from(sorted({g.host for g in gpus})))
            on_host = [g.uuid for g in gpus if g.host == host]
            named = tuple(
                draw(st.lists(st.sampled_from(on_host), min_size=1, max_size=2, unique=True))
            )
        waiting.append(
            Want(
                kind=kind,
                id=1000 + n,
                gpus=len(named) if named else draw(st.integers(1, 5)),
                user=f"u{draw(st.integers(0, 3))}",
                pool=draw(st.one_of(st.none(), st.sampled_from(("a100", "3090")))),
                model=draw(st.one_of(st.none(), st.just("3090"))) if not named else None,
                named=named,
                since=draw(st.floats(0, NOW, allow_nan=False)),
                rank=draw(st.integers(0, 3)),
                fair=draw(st.sampled_from((1.0, 0.5, 0.25, 0.9))),
                over_quota=draw(st.booleans()) and draw(st.booleans()),
                off_hours_only=draw(st.booleans()) and draw(st.booleans()),
                time_limit_s=draw(st.one_of(st.none(), st.floats(60, 40_000, allow_nan=False))),
                blocked="Dependency" if draw(st.integers(0, 15)) == 0 else None,
            )
        )
    return ClusterView(
        gpus=tuple(gpus),
        waiting=tuple(waiting),
        running=tuple(running),
        now=NOW,
        off_hours=draw(st.booleans()),
        preemption=draw(st.booleans()),
        min_runtime_s=draw(st.sampled_from((0.0, 600.0, 5_000.0))),
        grace_s=10.0,
        backfill=draw(st.booleans()) or draw(st.booleans()),
    )
