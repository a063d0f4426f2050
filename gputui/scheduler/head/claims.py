"""What claim requests do to the store: GPUs named or counted, claimed, resumed,
granted, ended and released, and the pages and env lines that show them.

As in ``actions``, every function here runs inside one open transaction (``Tx``) in
the head's writer and either returns the result body or raises ``Refusal``; an admin
releasing someone else's claim must give a reason, audited in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head import privacy
from gputui.scheduler.head.actions import Context, authorize, check_feasible, new_want, next_after
from gputui.scheduler.head.views import claim_view
from gputui.scheduler.policy import model as policy
from gputui.scheduler.server.op_args import ClaimArgs, ReleaseArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import ListArgs
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Claim
from gputui.wire.words import say


def resolve_refs(refs: Sequence[str], slots: Sequence[policy.GpuSlot]) -> tuple[str, ...]:
    """GPU references (uuid, ``host:index``) -> uuids, refusing one that names nothing."""
    by_uuid = {s.uuid.lower(): s.uuid for s in slots}
    by_place = {f"{s.host}:{s.index}": s.uuid for s in slots if s.mig_profile is None}
    mig_cards = {s.uuid for s in slots if s.mig_enabled}
    out: list[str] = []
    for ref in refs:
        uuid = by_uuid.get(ref.lower()) or by_place.get(ref)
        if uuid is None:
            raise Refusal(
                "unknown-gpu",
                say(N_("no GPU {ref} (name one as HOST:INDEX or by uuid)"), ref=repr(ref)),
            )
        if uuid in mig_cards:
            raise Refusal(
                "impossible",
                say(
                    N_(
                        "GPU {ref} has MIG mode on: claim its slices (by MIG- uuid, or --mig"
                        " PROFILE)"
                    ),
                    ref=repr(ref),
                ),
            )
        if uuid not in out:
            out.append(uuid)
    vendors = {s.vendor for s in slots if s.uuid in out}
    if len(vendors) > 1:  # one CUDA_VISIBLE_DEVICES or one ROCR_VISIBLE_DEVICES, not both
        raise Refusal(
            "impossible",
            say(
                N_("the GPUs named are of more than one vendor (NVIDIA and AMD): claim each apart")
            ),
        )
    return tuple(out)


def claim(
    tx: Tx,
    caller: Caller,
    args: ClaimArgs,
    ctx: Context,
    *,
    session: str | None,
    place_now: Callable[[policy.Want], policy.Place | None],
) -> dict[str, Any]:
    named = resolve_refs(args.gpu_refs, ctx.slots) if args.gpu_refs else ()
    count = len(named) if named else (args.gpus or 1)
    item = Claim(
        uid=caller.uid,
        user=caller.user,
        group=ctx.rules.sched.group_of(caller.user, caller.groups, caller.group),
        gpus=count,
        wanted=json.dumps(list(named)),
        pool=args.pool,
        model=args.model,
        mig=args.mig,
        host_constraint=args.host,
        note=args.note,
        state="waiting",
        reason="Resources",
        created_at=ctx.now,
        max_duration_s=args.duration_s,
        idle_release_s=ctx.rules.claim_idle_s,
        session=session if args.session else None,
        project=args.project,
    )
    want = new_want(
        "claim",
        0,
        count,
        pool=args.pool,
        host=args.host,
        model=args.model,
        mig=None if named else args.mig,
        named=named,
        user=caller.user,
    )
    check_feasible(want, ctx)
    place = place_now(want)
    if place is None and not args.wait:
        raise Refusal(
            "busy",
            say(N_("{count} GPU(s) asked for are not free now (use --wait to queue)"), count=count),
        )
    tx.add_claim(item)
    if place is not None:
        grant_claim(tx, item, place, ctx)
    ctx.changed = True
    return {"claim": claim_view(item)}


def resume_claim(
    tx: Tx, caller: Caller, claim_id: int, ctx: Context, *, session: str | None
) -> dict[str, Any]:
    """A ``gputui run`` that lost its connection (the head restarted) takes its claim
    back onto its new one: from now on the claim ends when this connection does."""
    item = tx.claim(claim_id)
    if item is None or not caller.owns(item.uid):
        raise Refusal("unknown-claim", say(N_("no claim {claim_id} of yours"), claim_id=claim_id))
    if item.state not in ("waiting", "active"):
        why = item.release_reason or item.state
        raise Refusal(
            "bad-state",
            say(
                N_("claim {claim_id} is {state} ({why})"),
                claim_id=claim_id,
                state=item.state,
                why=why,
            ),
        )
    if item.session is None and item.idle_release_s != 0:
        raise Refusal(
            "bad-state",
            say(N_("claim {claim_id} is not a gputui run session's"), claim_id=claim_id),
        )
    item.session = session
    item.idle_release_s = ctx.rules.claim_idle_s
    item.last_active_at = ctx.now
    tx.flush()
    return {"claim": claim_view(item)}


def grant_claim(tx: Tx, item: Claim, place: policy.Place, ctx: Context) -> None:
    tx.allocate(place.gpu_uuids, place.host, ctx.now, claim_id=item.id)
    item.state, item.reason = "active", ""
    item.host = place.host
    item.gpu_uuids = json.dumps(list(place.gpu_uuids))
    item.granted_at = item.last_active_at = ctx.now
    if item.max_duration_s is not None:
        item.expires_at = ctx.now + item.max_duration_s


def end_claim(tx: Tx, item: Claim, ctx: Context, state: str, why: str) -> None:
    """End a claim, ``why`` kept as its release reason. One that never got its GPUs
    was cancelled while waiting: its reason for waiting (``Resources``) is no longer
    true, and ``claims --all`` says what happened instead."""
    if item.state == "waiting":
        item.reason = ""
        why = "cancelled while waiting" + ("" if why == "released" else f" ({why})")
    if item.id is not None:
        tx.free(ctx.now, claim_id=item.id)
    item.state = state
    item.released_at = ctx.now
    item.release_reason = why
    ctx.changed = True
    if item.booking_id is not None:  # its booking is over with it (``bookings.tick``)
        ctx.bookings_moved = True


def release(tx: Tx, caller: Caller, args: ReleaseArgs, ctx: Context) -> dict[str, Any]:
    live = tx.claims(("waiting", "active"))
    chosen: list[Claim] = []
    if args.all:
        chosen = [c for c in live if c.uid == caller.uid]
    for claim_id in args.claim_ids:
        found = next((c for c in live if c.id == claim_id), None)
        if found is None:
            raise Refusal("unknown-claim", say(N_("no active claim {claim_id}"), claim_id=claim_id))
        chosen.append(found)
    if args.gpu_refs:
        uuids = set(resolve_refs(args.gpu_refs, ctx.slots))
        holding = [c for c in live if uuids & set(json.loads(c.gpu_uuids))]
        if not holding:
            raise Refusal(
                "unknown-claim", say(N_("no claim holds {gpus}"), gpus=", ".join(args.gpu_refs))
            )
        mine = [c for c in holding if c.uid == caller.uid]
        chosen.extend(mine or holding)
    if not chosen and not args.all:
        raise Refusal("bad-args", say(N_("release: name claims, GPUs, or --all")))
    done: list[dict[str, Any]] = []
    for item in {c.id: c for c in chosen}.values():
        authorize(tx, caller, ctx, "release", kind="claim", item=item, reason=args.reason)
        who = "" if caller.owns(item.uid) else f" by {caller.user}"
        end_claim(tx, item, ctx, "released", "released" + who)  # authorize told the owner
        done.append(claim_view(item))
    tx.flush()
    return {"released": done}


def claims(tx: Tx, caller: Caller, args: ListArgs, *, private: bool = False) -> dict[str, Any]:
    """As ``queue``: a page of claims, oldest first, and ``next``."""
    states = None if args.all else ("waiting", "active")
    found = tx.claims(states, user=args.user, limit=args.limit + 1, after=args.after)
    page = found[: args.limit]
    return {
        "claims": [privacy.hide_claim(claim_view(c), caller, c.uid, private) for c in page],
        "next": next_after(page, len(found)),
    }


def env_line(tx: Tx, caller: Caller, host: str | None) -> dict[str, Any]:
    mine = [c for c in tx.claims(("active",)) if c.uid == caller.uid]
    if host is not None:
        mine = [c for c in mine if c.host == host]
    uuids: list[str] = []
    for c in mine:
        uuids.extend(json.loads(c.gpu_uuids))
    hosts = sorted({c.host for c in mine if c.host})
    # No shell line: the client builds it from the UUIDs (gputui.common.gpu_env), so nothing
    # the head says is ever evaluated by a shell.
    return {"uuids": uuids, "hosts": hosts}
