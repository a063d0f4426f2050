"""What the head knows is wrong with each card of a host, as placement's plain data.

From a host's latest sample and the health board's findings for it: memory held by
no process (``phantom``), a process on the card (``rogue``: on a card nobody holds,
only a process nobody was given it for; ``HostWatch`` keeps these, and whoever reads
them knows which cards are allocated), a health problem (``warning``,
``critical``; not the conditions the head fences a card for: its fence keeps those
out, with its own way back, an admin's unfence). The same processes are left out
as the ownership flags leave out: graphics ones, those of ``exempt_users``, those
whose owner the host cannot read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gputui.common.i18n import N_
from gputui.common.printable import owner_name
from gputui.health.fencing import CONDITIONS, FENCE_XIDS
from gputui.health.finding import Finding
from gputui.health.rules import holds_memory_without_process
from gputui.health.words import said
from gputui.scheduler.head.watch.slices import slice_samples
from gputui.scheduler.policy.cards import CRITICAL, PHANTOM, ROGUE, WARNING, CardProblem
from gputui.wire.messages import GpuSample, ProcessSample, Sample
from gputui.wire.words import Words, say

SHOWN_USERS = 3
"""Owners a rogue line names at most."""
PHANTOM_CODE = "orphan-memory"
"""The health board's finding for phantom memory (counted as ``phantom``, not twice)."""


def fenced_for(code: str) -> bool:
    """Whether a finding's ``code`` is a condition the head fences a card for."""
    if code.startswith("xid-"):
        number = code.removeprefix("xid-")
        return number.isdigit() and int(number) in FENCE_XIDS
    return code in CONDITIONS


def counts(proc: ProcessSample, exempt_users: Collection[str]) -> bool:
    """Whether a process on a card nobody holds makes it ``rogue``."""
    if proc.kind == "graphics" or (proc.uid is None and proc.user is None):
        return False
    return proc.user is None or proc.user not in exempt_users


def _rogue_words(procs: Sequence[ProcessSample], util: int | None) -> Words:
    if len(procs) == 1:
        p = procs[0]
        owner = owner_name(p.user, p.uid)
        if util is None:
            return say(
                N_("pid {pid} of {owner} runs on it with no job or claim"), pid=p.pid, owner=owner
            )
        return say(
            N_("pid {pid} of {owner} runs on it with no job or claim, the GPU at {util}%"),
            pid=p.pid, owner=owner, util=util,
        )  # fmt: skip
    users = sorted({owner_name(p.user, p.uid) for p in procs})
    named = ", ".join(users[:SHOWN_USERS]) + (" …" if len(users) > SHOWN_USERS else "")
    if util is None:
        return say(
            N_("{count} processes ({named}) run on it with no job or claim"),
            count=len(procs), named=named,
        )  # fmt: skip
    return say(
        N_("{count} processes ({named}) run on it with no job or claim, the GPU at {util}%"),
        count=len(procs), named=named, util=util,
    )  # fmt: skip


def of_gpu(
    gpu: GpuSample, findings: Sequence[Finding], exempt_users: Collection[str]
) -> tuple[CardProblem, ...]:
    """The problems of one card (``findings``: the board's for this card), worst first."""
    out: list[CardProblem] = []
    for f in findings:
        if f.severity == "crit" and not fenced_for(f.code):
            out.append(CardProblem(CRITICAL, f.title, said(f.title)))
    if holds_memory_without_process(gpu) and gpu.mem_used_mib is not None:
        gib = f"{gpu.mem_used_mib / 1024:.1f}"
        held = say(N_("{gib} GiB held by no process"), gib=gib)
        out.append(CardProblem(PHANTOM, said=held))
    procs = [p for p in gpu.processes if counts(p, exempt_users)]
    if procs:
        rogue = _rogue_words(procs, gpu.util_gpu)
        out.append(CardProblem(ROGUE, said=rogue))
    for f in findings:
        if f.severity == "warn" and f.code != PHANTOM_CODE:
            out.append(CardProblem(WARNING, f.title, said(f.title)))
    return tuple(out)


def of_host(
    sample: Sample, findings: Sequence[Finding], exempt_users: Collection[str]
) -> dict[str, tuple[CardProblem, ...]]:
    """The problems of each card in ``sample`` that has any."""
    by_uuid: dict[str, list[Finding]] = {}
    for f in findings:
        if f.uuid is not None:
            by_uuid.setdefault(f.uuid, []).append(f)
    out = {}
    for gpu in sample.gpus:
        found = of_gpu(gpu, by_uuid.get(gpu.uuid, ()), exempt_users)
        if found:
            out[gpu.uuid] = found
        if not gpu.mig:
            continue
        for piece in slice_samples(gpu):  # a MIG slice: its card's health, its own processes
            found = of_gpu(piece, by_uuid.get(gpu.uuid, ()), exempt_users)
            if found:
                out[piece.uuid] = found
    return out
