"""An admin's drain and undrain (a host or one GPU), and an admin's unfence.

A drained GPU takes no new claim or job; what already runs there goes on to its
end. A drain is kept apart from the head's own fence (``fences``): undrain never
lifts a fence and unfence never lifts a drain, each shows who, why and since when.
Only admins act here (identity from the socket, as everywhere); each act writes
its ``Audit`` row in the transaction that makes the change, and a refusal changes
nothing (the request's savepoint is undone).

A target is ``HOST`` (drain or undrain the whole host) or ``HOST:GPU`` where GPU is
the card's index or uuid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.scheduler.head import fences
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.holder_notices import tell_holders
from gputui.scheduler.head.views import gpu_view
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.lookup import gpus_named, no_gpu, no_host
from gputui.scheduler.server.op_args import DrainArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Gpu, Host

OPS = frozenset({"drain", "undrain", "unfence"})
STILL_LOST = "; the GPU is still lost (NVML GpuIsLost): no work lands there until it is back"


def _admin(caller: Caller, verb: str, target: str) -> None:
    if not caller.admin:
        raise Refusal("denied", f"{verb} {target}: only an admin may {verb}")


def _gpu_of(tx: Tx, host: str, ref: str, target: str) -> Gpu:
    gpus = [g for g in tx.gpus() if g.host == host]
    found = gpus_named(gpus, ref)
    if not found:
        raise Refusal("unknown-gpu", no_gpu(target, host, gpus))
    return ([g for g in found if g.present] or found)[0]  # a present one before a gone one


def _resolve(tx: Tx, ctx: Context, watch: HostWatch, target: str) -> tuple[Host | None, Gpu | None]:
    """``HOST`` -> (its row, None); ``HOST:GPU`` -> (None, the GPU's row)."""
    name, colon, ref = target.partition(":")
    known = ctx.hosts | {h.name for h in tx.hosts()}
    if name not in known:
        raise Refusal("unknown-host", no_host(name, known))
    if colon:
        if not ref:
            raise Refusal("bad-args", f"{target!r}: name the GPU after the colon (index or uuid)")
        return None, _gpu_of(tx, name, ref, target)
    host = tx.host(name) or Host(name=name, pool=watch.host_pools.get(name, "default"))
    return host, None


def _audit(
    tx: Tx, caller: Caller, ctx: Context, action: str, target: str, *, reason: str, outcome: str
) -> None:
    tx.audit(
        Audit(
            time=ctx.now,
            uid=caller.uid,
            user=caller.user[:64],
            action=action,
            target=target[:128],
            reason=reason[:512],
            outcome=outcome[:256],
        )
    )


def _reason(args: DrainArgs, verb: str, *, required: bool) -> str:
    reason = " ".join((args.reason or "").split())
    if required and not reason:
        raise Refusal(
            "reason-required", f"{verb} {args.target}: give --reason (why, for the audit)"
        )
    return reason


def drain(
    tx: Tx, caller: Caller, args: DrainArgs, ctx: Context, watch: HostWatch, *, tell: bool = True
) -> dict[str, Any]:
    """Drain a host or GPU; unless ``tell`` is False (a force-free, whose next step
    tells them more), its holders get a notice."""
    _admin(caller, "drain", args.target)
    reason = _reason(args, "drain", required=True)
    host, gpu = _resolve(tx, ctx, watch, args.target)
    row: Host | Gpu | None = host if host is not None else gpu
    assert row is not None
    outcome = "drained"
    fresh = not row.drained
    if fresh:
        row.drained_at = ctx.now
    else:
        outcome = f"already drained by {row.drained_by}; reason updated"
    row.drained_by, row.drain_reason = caller.user[:64], reason[:512]
    if fresh and tell:
        cards = (
            [gpu]
            if gpu is not None
            else [g for g in tx.gpus() if host is not None and g.host == host.name]
        )
        told = tell_holders(
            tx,
            cards,
            ctx.now,
            lambda held: (
                f"{held}: drained by {caller.user} (admin): {reason};"
                " what runs there goes on, no new work lands there"
            ),
        )
        if told:
            outcome += f"; {told} holder{'s' if told != 1 else ''} told"
    if gpu is not None and gpu.fenced:
        outcome += f" (also fenced: {gpu.fence_code})"
    _audit(tx, caller, ctx, "drain", args.target, reason=reason, outcome=outcome)
    return _done(tx, ctx, watch, host, gpu, outcome=outcome)


def undrain(
    tx: Tx, caller: Caller, args: DrainArgs, ctx: Context, watch: HostWatch
) -> dict[str, Any]:
    _admin(caller, "undrain", args.target)
    reason = _reason(args, "undrain", required=False)
    host, gpu = _resolve(tx, ctx, watch, args.target)
    row: Host | Gpu | None = host if host is not None else gpu
    assert row is not None
    if not row.drained:
        extra = ""
        if gpu is not None and watch.host_drained(gpu.host):
            extra = f"; its host is: undrain {gpu.host}"
        raise Refusal("bad-state", f"undrain {args.target}: not drained{extra}")
    row.drained_at = row.drained_by = row.drain_reason = None
    outcome = "undrained"
    if gpu is not None and gpu.fenced:
        outcome += f" (still fenced: {gpu.fence_code})"
    _audit(tx, caller, ctx, "undrain", args.target, reason=reason, outcome=outcome)
    return _done(tx, ctx, watch, host, gpu, outcome=outcome)


def unfence(
    tx: Tx, caller: Caller, args: DrainArgs, ctx: Context, watch: HostWatch
) -> dict[str, Any]:
    _admin(caller, "unfence", args.target)
    if ":" not in args.target:
        raise Refusal("bad-args", f"unfence {args.target}: name one GPU as HOST:GPU")
    reason = _reason(args, "unfence", required=True)
    _, gpu = _resolve(tx, ctx, watch, args.target)
    assert gpu is not None
    if not gpu.fenced:
        raise Refusal("bad-state", f"unfence {args.target}: not fenced")
    code = gpu.fence_code
    # Not fenced any more, but a lost card is not healthy: nothing lands there until
    # it answers again, and the admin is told so.
    note = STILL_LOST if watch.gpu_state(gpu.uuid) == "lost" else ""
    gpu = fences.clear_fence(tx, gpu, reason, ctx.now, uid=caller.uid, user=caller.user, note=note)
    outcome = f"fence {code} lifted" + (" (still drained)" if gpu.drained else "") + note
    return _done(tx, ctx, watch, None, gpu, outcome=outcome)


def _done(
    tx: Tx, ctx: Context, watch: HostWatch, host: Host | None, gpu: Gpu | None, *, outcome: str
) -> dict[str, Any]:
    if host is not None:
        host = tx.put_host(host)
        watch.remember(host=host)
        gpus = [g for g in tx.gpus() if g.host == host.name and g.present]
    else:
        assert gpu is not None
        gpus = [tx.put_gpu(gpu)]
        watch.remember(gpus)
    ctx.changed = True
    tx.flush()
    host_drained = {g.host: watch.host_drained(g.host) for g in gpus}
    return {
        "outcome": outcome,
        "gpus": [gpu_view(g, None, host_drained=host_drained[g.host]) for g in gpus],
    }


HANDLERS: dict[str, Callable[[Tx, Caller, DrainArgs, Context, HostWatch], dict[str, Any]]] = {
    "drain": drain,
    "undrain": undrain,
    "unfence": unfence,
}


def unavailable(watch: HostWatch) -> dict[str, Any]:
    """The present GPUs that take no new work now: drained (or on a drained host) or
    fenced, for ``gputui queue`` to list under the queue."""
    out = []
    for gpu in watch.present_gpus():
        on_drained = watch.host_drained(gpu.host)
        if gpu.drained or gpu.fenced or on_drained:
            out.append(gpu_view(gpu, None, host_drained=on_drained))
    out.sort(key=lambda v: (v["host"], v["index"]))
    return {"unavailable": out}
