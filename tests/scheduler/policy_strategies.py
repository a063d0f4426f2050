"""Hypothesis strategies for whole cluster views: hosts, running work, a line of requests."""

from __future__ import annotations

from hypothesis import strategies as st

from gputui.scheduler.policy.model import ClusterView, GpuSlot, Running, Want
from gputui.scheduler.policy.vendors import card_pool

NOW = 100_000.0
MODELS = ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 3090")


AMD_MODELS = ("AMD Instinct MI300X", "AMD Instinct MI210")
POOLS = ("a100", "3090")
AMD_POOLS = tuple(card_pool("x", "amd", m) for m in AMD_MODELS)

# The strategies views() draws from, made once: hypothesis validates and labels each
# new strategy object, which cost most of a view's drawing when made per draw (what
# is drawn is the same either way).
_POOL = st.sampled_from(POOLS)
_AMD_MODEL = st.sampled_from(AMD_MODELS)
_KIND = st.sampled_from(("job", "job", "job", "claim"))
_LIMIT = st.one_of(st.none(), st.floats(60, 40_000, allow_nan=False))
_WANT_POOL = {
    False: st.one_of(st.none(), st.sampled_from(POOLS)),
    True: st.one_of(st.none(), st.sampled_from(POOLS + AMD_POOLS)),
}
_MODEL = st.one_of(st.none(), st.just("3090"))
_FAIR = st.sampled_from((1.0, 0.5, 0.25, 0.9))
_MIN_RUNTIME = st.sampled_from((0.0, 600.0, 5_000.0))


@st.composite
def views(
    draw: st.DrawFn, max_hosts: int = 5, max_waiting: int = 24, amd: bool = False
) -> ClusterView:
    """``amd``: some hosts also have AMD cards (after their NVIDIA ones, as a helper
    numbers them), in their own pools, and some requests ask for those pools."""
    n_hosts = draw(st.integers(1, max_hosts))
    gpus: list[GpuSlot] = []
    for h in range(n_hosts):
        host = f"h{h}"
        pool = draw(_POOL)
        mixed = draw(st.booleans()) and draw(st.booleans())
        n_nvidia = draw(st.integers(0 if amd else 1, 8))
        n_amd = draw(st.integers(0 if n_nvidia else 1, 4)) if amd else 0
        amd_model = draw(_AMD_MODEL)
        for i in range(n_nvidia + n_amd):
            model = MODELS[0] if pool == "a100" else MODELS[1]
            if mixed and i % 2:
                model = MODELS[1 - MODELS.index(model)]
            vendor = "amd" if i >= n_nvidia else "nvidia"
            if vendor == "amd":
                model = amd_model
            healthy = not (draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()))
            gpus.append(
                GpuSlot(
                    uuid=f"GPU-{h}-{i}",
                    host=host,
                    index=i,
                    pool=card_pool(pool, vendor, model),
                    model=model,
                    vendor=vendor,
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
            kind = draw(_KIND)
            started = NOW - draw(st.floats(0, 20_000, allow_nan=False))
            limit = draw(_LIMIT)
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
            g.vendor,
        )
        for g in gpus
    ]
    waiting: list[Want] = []
    for n in range(draw(st.integers(0, max_waiting))):
        kind = draw(_KIND)
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
                pool=draw(_WANT_POOL[amd]),
                model=draw(_MODEL) if not named else None,
                named=named,
                since=draw(st.floats(0, NOW, allow_nan=False)),
                rank=draw(st.integers(0, 3)),
                fair=draw(_FAIR),
                over_quota=draw(st.booleans()) and draw(st.booleans()),
                off_hours_only=draw(st.booleans()) and draw(st.booleans()),
                time_limit_s=draw(_LIMIT),
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
        min_runtime_s=draw(_MIN_RUNTIME),
        grace_s=10.0,
        backfill=draw(st.booleans()) or draw(st.booleans()),
    )
