"""The head's own fences, store side: a GPU the health rules call unhealthy is fenced
off (no new claim or job), and the fence lifts by itself only as its rule says.

``gputui.health.fencing.fence_reasons`` says, per GPU, which fencing conditions its
latest readings show and which could not be judged, and how each fence may clear:
``condition`` (lifted once a fresh reading shows it cleared: a condition that could
not be judged holds its fence) or ``reboot`` (lifted once the host booted after the
fence). An admin may lift a fence with a reason (``unfence``); that waives the one
condition it named, until it is gone or, for an Xid, until the Xid comes again, so
the next sample does not fence the card straight back; any other condition fences
it again. A GPU keeps every waiver an admin gave (``fence_waived``: their codes).

A fence is kept apart from an admin's drain: neither sets nor clears the other.
Each fence and each lift is audited as the head (``gputui-head``) in the
transaction that makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gputui.common.i18n import N_
from gputui.health.fencing import NOTHING_KNOWN, Fence, Verdict, rank
from gputui.scheduler.head.gpufacts import AnyGpu
from gputui.scheduler.head.holder_notices import tell_holders
from gputui.scheduler.server.peer import HEAD_ACTOR
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Gpu
from gputui.wire.words import say

WAIVED_MAX = 256
"""The most characters of waived codes a GPU row keeps (``Gpu.fence_waived``)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One change to a GPU's fence: fence it (``fence``), lift it (``fence`` None,
    ``why`` says why), and/or change the admin's waivers (``waived``: the codes
    still waived; None: unchanged)."""

    uuid: str
    fence: Fence | None
    why: str = ""
    waived: tuple[str, ...] | None = None
    lift: bool = False
    renew: bool = False
    """Fenced since now, even for the code it had (it came again after a reboot)."""


def _xid(code: str) -> int | None:
    head, _, number = code.partition("-")
    return int(number) if head == "xid" and number.isdigit() else None


def waivers(gpu: AnyGpu) -> tuple[str, ...]:
    """The condition codes an admin waived on ``gpu`` (its unfences), oldest first."""
    return tuple(c for c in (gpu.fence_waived or "").split(",") if c)


def waived_text(codes: Iterable[str]) -> str | None:
    """``codes`` as ``Gpu.fence_waived`` keeps them (None: none); the newest kept
    when they would not fit."""
    kept: list[str] = []
    for code in reversed(list(dict.fromkeys(codes))):
        if sum(len(c) + 1 for c in kept) + len(code) > WAIVED_MAX:
            break
        kept.insert(0, code)
    return ",".join(kept) or None


def plan(
    gpu: AnyGpu,
    verdict: Verdict,
    *,
    boot_time: float | None,
    xid_times: Mapping[int, float],
) -> Step | None:
    """What to do to ``gpu``'s fence, given what its latest readings say
    (``verdict``), the host's boot time and, per Xid, when this GPU last had it
    (None: nothing). Pure: the watcher asks it of its cached rows, the writer of
    the rows in its transaction."""
    waived = waivers(gpu)
    keep = []
    for waiver in waived:
        xid = _xid(waiver)
        again = xid is not None and xid_times.get(xid, -1.0) > (gpu.fence_waived_at or 0)
        if not again and verdict.may_hold(waiver):
            keep.append(waiver)  # still waived: it shows (or is not known to be gone)
    new = tuple(keep) if len(keep) != len(waived) else None
    wanted = next((f for f in verdict.fences if f.code not in keep), None)
    code = gpu.fence_code
    if code is None:
        if wanted is not None:
            return Step(gpu.uuid, wanted, waived=new)
    elif gpu.fence_clears == "reboot":
        # A later sample shows nothing to watch (an Xid is an event); only a reboot
        # after the fence (or an admin) lifts it, and nothing replaces it.
        fenced_at = gpu.fenced_at or 0.0
        if boot_time is not None and boot_time > fenced_at:
            if wanted is not None:  # something fences it since the reboot: that, from now
                return Step(gpu.uuid, wanted, waived=new, renew=True)
            return Step(gpu.uuid, None, "the host rebooted", new, lift=True)
    elif not verdict.may_hold(code):  # a fresh reading shows it cleared
        if wanted is None:
            return Step(gpu.uuid, None, "the condition cleared", new, lift=True)
        return Step(gpu.uuid, wanted, waived=new)
    elif wanted is not None and rank(wanted.code) < rank(code):
        return Step(gpu.uuid, wanted, waived=new)  # a worse condition: fenced for that
    return Step(gpu.uuid, None, waived=new) if new is not None else None


def plan_host(
    gpus: Iterable[AnyGpu],
    verdicts: Mapping[str, Verdict],
    *,
    boot_time: float | None,
    xid_times: Mapping[str, Mapping[int, float]],
) -> list[Step]:
    """``plan`` for each present GPU of one host (``xid_times`` by GPU uuid; a GPU
    with no verdict: nothing could be judged)."""
    steps = []
    for gpu in gpus:
        if not gpu.present:
            continue
        step = plan(
            gpu,
            verdicts.get(gpu.uuid, NOTHING_KNOWN),
            boot_time=boot_time,
            xid_times=xid_times.get(gpu.uuid, {}),
        )
        if step is not None:
            steps.append(step)
    return steps


def where(gpu: Gpu) -> str:
    return f"{gpu.host}:{gpu.index}"


def fence(
    tx: Tx,
    gpu: Gpu,
    code: str,
    reason: str,
    now: float,
    *,
    clears: str = "condition",
    renew: bool = False,
) -> Gpu:
    """Fence ``gpu`` off (or change why, keeping since when for the same code unless
    ``renew``)."""
    if gpu.fence_code != code or renew:
        gpu.fenced_at = now
        tell_holders(
            tx,
            [gpu],
            now,
            lambda kind, ident, cards: say(
                N_(
                    "job {id} on {cards}: fenced by the head: {reason}; the card is unhealthy,"
                    " work there may fail; no new work lands there"
                )
                if kind == "job"
                else N_(
                    "claim {id} on {cards}: fenced by the head: {reason}; the card is"
                    " unhealthy, work there may fail; no new work lands there"
                ),
                id=ident,
                cards=cards,
                reason=reason,
            ),
            notice_kind="fence",
        )
    gpu.fence_code, gpu.fence_reason, gpu.fence_clears = code[:32], reason[:512], clears[:16]
    tx.audit(
        Audit(
            time=now,
            uid=0,
            user=HEAD_ACTOR,
            action="fence",
            target=where(gpu)[:128],
            reason=reason[:512],
            outcome=f"fenced ({code}; clears on {clears})"[:256],
        )
    )
    return tx.put_gpu(gpu)


def clear_fence(
    tx: Tx,
    gpu: Gpu,
    reason: str,
    now: float,
    *,
    uid: int = 0,
    user: str = HEAD_ACTOR,
    note: str = "",
) -> Gpu:
    """Lift ``gpu``'s fence: by the head (its condition cleared) or by an admin
    (``uid``/``user``; the condition is then waived until it is gone); ``note`` ends
    the audit row's outcome."""
    code = gpu.fence_code or "?"
    if user != HEAD_ACTOR and gpu.fence_code is not None:
        gpu.fence_waived = waived_text((*waivers(gpu), gpu.fence_code))
        gpu.fence_waived_at = now
    gpu.fence_code = gpu.fence_reason = gpu.fenced_at = gpu.fence_clears = None
    still = " (still drained)" if gpu.drained else ""
    tx.audit(
        Audit(
            time=now,
            uid=uid,
            user=user[:64],
            action="unfence",
            target=where(gpu)[:128],
            reason=reason[:512],
            outcome=f"fence {code} lifted{still}{note}"[:256],
        )
    )
    return tx.put_gpu(gpu)


def apply(
    tx: Tx,
    host: str,
    verdicts: Mapping[str, Verdict],
    *,
    boot_time: float | None,
    xid_times: Mapping[str, Mapping[int, float]],
    now: float,
) -> list[Gpu]:
    """Plan ``host``'s fences again on the rows of this transaction (so news planned
    twice, or overtaken by an admin's unfence, is applied once) and carry the plan
    out; the rows changed."""
    rows = [g for g in tx.gpus() if g.host == host]
    changed = []
    for step in plan_host(rows, verdicts, boot_time=boot_time, xid_times=xid_times):
        gpu = tx.gpu(step.uuid)
        if gpu is None:
            continue
        if step.waived is not None:
            gpu.fence_waived = waived_text(step.waived)
            if gpu.fence_waived is None:
                gpu.fence_waived_at = None
        if step.fence is not None:
            f = step.fence
            gpu = fence(tx, gpu, f.code, f.reason, now, clears=f.clears, renew=step.renew)
        elif step.lift:
            gpu = clear_fence(tx, gpu, step.why, now)
        else:
            gpu = tx.put_gpu(gpu)
        changed.append(gpu)
    return changed
