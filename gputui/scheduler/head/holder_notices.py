"""Telling the people who hold a GPU that an admin or the head took it out of service.

A drain or a fence does not stop what runs on a card, but its holder should hear of
it: a job on a card the head fenced for an Xid 79 will likely fail, and a claim on a
drained card is one an admin wants back. ``tell_holders`` writes one notice per
holder (a job or a claim) of the GPUs named, in the transaction that made the
change, so the notice and the change land together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Gpu, Notice
from gputui.wire.words import Words

Holding = Callable[[str, int, str], Words]
"""Given what is held (``"job"`` or ``"claim"``, its id, its cards), the notice's words."""


def tell_holders(
    tx: Tx, gpus: Iterable[Gpu], now: float, text: Holding, notice_kind: str = "admin"
) -> int:
    """One notice (of ``notice_kind``: ``admin`` for a drain, ``fence`` for the head's
    fence) per job or claim holding any of ``gpus``; how many were written."""
    where = {g.uuid: f"{g.host}:{g.index}" for g in gpus}
    if not where:
        return 0
    held: dict[tuple[str, int], list[str]] = {}
    for alloc in tx.live_allocations():
        if alloc.gpu_uuid not in where:
            continue
        if alloc.job_id is not None:
            held.setdefault(("job", alloc.job_id), []).append(where[alloc.gpu_uuid])
        elif alloc.claim_id is not None:
            held.setdefault(("claim", alloc.claim_id), []).append(where[alloc.gpu_uuid])
    written = 0
    for (kind, ident), cards in sorted(held.items()):
        row = tx.job(ident) if kind == "job" else tx.claim(ident)
        if row is None:
            continue
        cards_text = ", ".join(sorted(cards))
        tx.notice(
            Notice.of(
                uid=row.uid,
                time=now,
                kind=notice_kind,
                text=text(kind, ident, cards_text),
                job_id=ident if kind == "job" else None,
                claim_id=ident if kind == "claim" else None,
            )
        )
        written += 1
    return written
