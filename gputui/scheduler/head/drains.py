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

from gputui.common.i18n import N_
from gputui.scheduler.head import fences
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.holder_notices import tell_holders
from gputui.scheduler.head.views import gpu_view
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.lookup import gpus_named, no_gpu_words, no_host_words
from gputui.scheduler.server.op_args import DrainArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Gpu, Host
from gputui.wire.words import Words, fields_of, say

OPS = frozenset({"drain", "undrain", "unfence"})
STILL_LOST = "; the GPU is still lost (NVML GpuIsLost): no work lands there until it is back"


def _admin(caller: Caller, verb: str, target: str) -> None:
    if not caller.admin:
        raise Refusal(
            "denied", say(N_("{verb} {target}: only an admin may {verb}"), verb=verb, target=target)
        )


def _gpu_of(tx: Tx, host: str, ref: str, target: str) -> Gpu:
    gpus = [g for g in tx.gpus() if g.host == host]
    found = gpus_named(gpus, ref)
    if not found:
        raise Refusal("unknown-gpu", no_gpu_words(target, host, gpus))
    return ([g for g in found if g.present] or found)[0]  # a present one before a gone one


def _resolve(tx: Tx, ctx: Context, watch: HostWatch, target: str) -> tuple[Host | None, Gpu | None]:
    """``HOST`` -> (its row, None); ``HOST:GPU`` -> (None, the GPU's row)."""
    name, colon, ref = target.partition(":")
    known = ctx.hosts | {h.name for h in tx.hosts()}
    if name not in known:
        raise Refusal("unknown-host", no_host_words(name, known))
    if colon:
        if not ref:
            raise Refusal(
                "bad-args",
                say(
                    N_("{target}: name the GPU after the colon (index or uuid)"),
                    target=repr(target),
                ),
            )
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
            "reason-required",
            say(
                N_("{verb} {target}: give --reason (why, for the audit)"),
                verb=verb,
                target=args.target,
            ),
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
    fresh = not row.drained
    by = row.drained_by or ""
    if fresh:
        row.drained_at = ctx.now
    told_words: Words | None = None
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
            lambda kind, ident, cards: say(
                N_(
                    "job {id} on {cards}: drained by {admin} (admin): {reason}; what runs there"
                    " goes on, no new work lands there"
                )
                if kind == "job"
                else N_(
                    "claim {id} on {cards}: drained by {admin} (admin): {reason}; what runs"
                    " there goes on, no new work lands there"
                ),
                id=ident,
                cards=cards,
                admin=caller.user,
                reason=reason,
            ),
        )
        if told:
            told_words = say(
                N_("{count} holder told") if told == 1 else N_("{count} holders told"),
                count=told,
            )
    code = gpu.fence_code if gpu is not None and gpu.fenced else None
    if not fresh:
        template = _AGAIN[code is not None]
        outcome = say(template, **_given(template, user=by, code=code or ""))
    else:
        template = _DRAINED[told_words is not None, code is not None]
        fields = _given(template, code=code or "")
        outcome = say(template, **fields, **({"told": told_words} if told_words else {}))
    _audit(tx, caller, ctx, "drain", args.target, reason=reason, outcome=outcome.english())
    return _done(tx, ctx, watch, host, gpu, outcome=outcome)


_DRAINED = {
    (False, False): N_("drained"),
    (True, False): N_("drained; {told}"),
    (False, True): N_("drained (also fenced: {code})"),
    (True, True): N_("drained; {told} (also fenced: {code})"),
}
"""A drain's outcome: (holders told, the card fenced too) -> template."""
_AGAIN = {
    False: N_("already drained by {user}; reason updated"),
    True: N_("already drained by {user}; reason updated (also fenced: {code})"),
}
"""A drain of what was drained already: (the card fenced too) -> template."""
_UNFENCED = {
    (False, False): N_("fence {code} lifted"),
    (True, False): N_("fence {code} lifted (still drained)"),
    (False, True): N_(
        "fence {code} lifted; the GPU is still lost (NVML GpuIsLost): no work lands there"
        " until it is back"
    ),
    (True, True): N_(
        "fence {code} lifted (still drained); the GPU is still lost (NVML GpuIsLost): no"
        " work lands there until it is back"
    ),
}
"""An unfence's outcome: (still drained, still lost) -> template."""


def _given(template: str, **fields: str) -> dict[str, str]:
    """The ``fields`` that ``template`` names (a template without ``{code}`` is given none)."""
    wanted = fields_of(template) or set()
    return {k: v for k, v in fields.items() if k in wanted}


def undrain(
    tx: Tx, caller: Caller, args: DrainArgs, ctx: Context, watch: HostWatch
) -> dict[str, Any]:
    _admin(caller, "undrain", args.target)
    reason = _reason(args, "undrain", required=False)
    host, gpu = _resolve(tx, ctx, watch, args.target)
    row: Host | Gpu | None = host if host is not None else gpu
    assert row is not None
    if not row.drained:
        if gpu is not None and watch.host_drained(gpu.host):
            raise Refusal(
                "bad-state",
                say(
                    N_("undrain {target}: not drained; its host is: undrain {host}"),
                    target=args.target,
                    host=gpu.host,
                ),
            )
        raise Refusal("bad-state", say(N_("undrain {target}: not drained"), target=args.target))
    row.drained_at = row.drained_by = row.drain_reason = None
    if gpu is not None and gpu.fenced:
        outcome = say(N_("undrained (still fenced: {code})"), code=gpu.fence_code or "")
    else:
        outcome = say(N_("undrained"))
    _audit(tx, caller, ctx, "undrain", args.target, reason=reason, outcome=outcome.english())
    return _done(tx, ctx, watch, host, gpu, outcome=outcome)


def unfence(
    tx: Tx, caller: Caller, args: DrainArgs, ctx: Context, watch: HostWatch
) -> dict[str, Any]:
    _admin(caller, "unfence", args.target)
    if ":" not in args.target:
        raise Refusal(
            "bad-args", say(N_("unfence {target}: name one GPU as HOST:GPU"), target=args.target)
        )
    reason = _reason(args, "unfence", required=True)
    _, gpu = _resolve(tx, ctx, watch, args.target)
    assert gpu is not None
    if not gpu.fenced:
        raise Refusal("bad-state", say(N_("unfence {target}: not fenced"), target=args.target))
    code = gpu.fence_code
    # Not fenced any more, but a lost card is not healthy: nothing lands there until
    # it answers again, and the admin is told so.
    note = STILL_LOST if watch.gpu_state(gpu.uuid) == "lost" else ""
    gpu = fences.clear_fence(tx, gpu, reason, ctx.now, uid=caller.uid, user=caller.user, note=note)
    outcome = say(_UNFENCED[bool(gpu.drained), bool(note)], code=code or "")
    return _done(tx, ctx, watch, None, gpu, outcome=outcome)


def _done(
    tx: Tx, ctx: Context, watch: HostWatch, host: Host | None, gpu: Gpu | None, *, outcome: Words
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
        "outcome": outcome.english(),
        "outcome_words": outcome.wire(),
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
