"""``gpus``: every GPU with its state, its holder, its use and why it is unavailable
(``gputui gpus``, the role of ``sinfo`` and ``canhazgpu status``).

What the host watch knows (inventory, drains, fences, liveness, the latest sample's
utilisation, memory and processes, each card's problems) is copied on the head's
loop (``Seen.now``); the holders are read from a WAL snapshot on the reader thread
(``answer``), so the writer never waits for it. Anyone may ask.

A GPU's state is the first of: ``fenced`` (the head's fence), ``drained`` (it or its
host), ``unhealthy`` (its host does not answer, the card is lost or in error, or it
shows a problem placement never uses), ``job``, ``claimed``, ``rogue`` (a process
on it that nobody was given it for), ``stray`` (only processes of jobs placed on
other GPUs: the console's STRAY, as the ownership flags judge them), ``free``:
unclaimed and idle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.common.i18n import N_
from gputui.config.scheduler import Placement
from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.watch.cards import counts
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.head.watch.slices import with_slices
from gputui.scheduler.policy import cards
from gputui.scheduler.policy.cards import CardProblem
from gputui.scheduler.policy.ownership import Flag
from gputui.scheduler.server.read_args import GpusArgs
from gputui.scheduler.server.wire import LIVE_JOB_STATES, Refusal
from gputui.scheduler.store.api import Tx
from gputui.wire.messages import GpuSample
from gputui.wire.words import Words, joined, say

MAX_ROWS = 4096
"""GPUs one answer lists at most (then ``total`` says how many matched)."""
STATES = ("free", "claimed", "job", "rogue", "stray", "drained", "fenced", "unhealthy", "mig")


@dataclass(frozen=True, slots=True)
class Seen:
    """What the host watch knows now, copied on the head's loop."""

    gpus: tuple[GpuFacts, ...]
    drained_hosts: frozenset[str]
    live: Mapping[str, bool]
    samples: Mapping[str, GpuSample]
    """GPU uuid -> its live host's latest sample of it."""
    problems: Mapping[str, tuple[CardProblem, ...]]
    exempt_users: frozenset[str]
    strays: frozenset[str] = frozenset()
    """GPUs whose flagged processes are all a job's, outside its GPUs (``STRAY``)."""

    @classmethod
    def now(cls, watch: HostWatch, exempt_users: Sequence[str], flags: Sequence[Flag] = ()) -> Seen:
        gpus = tuple(sorted(watch.present_gpus(), key=lambda g: (g.host, g.index)))
        drained = frozenset(g.host for g in gpus if watch.host_drained(g.host))
        samples = {
            g.uuid: g for _, sample in watch.samples().values() for g in with_slices(sample.gpus)
        }
        problems = watch.card_problems()
        outside = {f.proc.gpu_uuid for f in flags if f.kind == "outside-allocation"}
        strays = outside - {f.proc.gpu_uuid for f in flags if f.kind == "no-allocation"}
        live = watch.live()
        return cls(
            gpus, drained, live, samples, problems, frozenset(exempt_users), frozenset(strays)
        )


def _holders(tx: Tx) -> dict[str, dict[str, Any]]:
    """GPU uuid -> the job or active claim that holds it: kind, id, user."""
    out: dict[str, dict[str, Any]] = {}
    for job in tx.jobs(LIVE_JOB_STATES):
        for uuid in json.loads(job.gpu_uuids):
            out[str(uuid)] = {"kind": "job", "id": job.id, "user": job.user}
    for claim in tx.claims(("active",)):
        for uuid in json.loads(claim.gpu_uuids):
            out[str(uuid)] = {"kind": "claim", "id": claim.id, "user": claim.user}
    return out


def _rogue_holder(sample: GpuSample | None, exempt_users: frozenset[str]) -> dict[str, Any] | None:
    """The first process that makes the card rogue (and how many there are)."""
    procs = [p for p in sample.processes if counts(p, exempt_users)] if sample else []
    if not procs:
        return None
    p = procs[0]
    return {"kind": "process", "pid": p.pid, "user": p.user, "processes": len(procs)}


def card_state(
    gpu: GpuFacts, seen: Seen, holder: dict[str, Any] | None, rules: Placement
) -> tuple[str, str]:
    """(state, why it is unavailable, or what placement makes of a free one)."""
    state, why = card_words(gpu, seen, holder, rules)
    return state, why if isinstance(why, str) else why.english()


def _problems(found: Sequence[cards.CardProblem], kinds: set[str]) -> Words:
    return joined([p.words() for p in found if p.kind in kinds])


def card_words(
    gpu: GpuFacts, seen: Seen, holder: dict[str, Any] | None, rules: Placement
) -> tuple[str, Words | str]:
    """``card_state``, its why in words where the head has them (a line as it was
    stored, a fence's reason, stays as it is)."""
    found = seen.problems.get(gpu.uuid, ())
    level = cards.standing((p.kind for p in found), rules)
    sample = seen.samples.get(gpu.uuid)
    if gpu.fenced:
        return "fenced", gpu.fence_reason or gpu.fence_code or ""
    if gpu.drained:
        reason = gpu.drain_reason or ""
        return "drained", say(
            N_("drained by {user}: {reason}"), user=gpu.drained_by or "?", reason=reason
        )
    if gpu.host in seen.drained_hosts:
        return "drained", say(N_("its host is drained"))
    if not seen.live.get(gpu.host, False) or sample is None:
        return "unhealthy", say(N_("its host does not answer"))
    if sample.state != "ok":
        return "unhealthy", say(N_("the card reads {code}"), code=sample.state)
    if level == cards.NEVER:
        return "unhealthy", _problems(found, set(rules.never))
    if gpu.mig_enabled:
        return "mig", say(N_("MIG mode on: its slices are placed (--mig PROFILE), not the card"))
    if holder is not None:
        return ("job" if holder["kind"] == "job" else "claimed"), ""
    if any(p.kind == cards.ROGUE for p in found):
        if gpu.uuid in seen.strays:
            return "stray", say(N_("a job's process outside the GPUs it was given"))
        return "rogue", say(N_("no job or claim on it"))  # the holder names the process
    if level == cards.LAST:
        avoid = [p.words() for p in found if p.kind in set(rules.avoid)]
        return "free", say(N_("{why} (used last)"), why=joined(avoid))
    return "free", ""


def answer(tx: Tx, args: GpusArgs, seen: Seen, rules: Placement) -> dict[str, Any]:
    """Every present GPU (of ``args.pool``; only the free ones with ``args.free``), by
    host and index, at most ``MAX_ROWS``."""
    pools = sorted({g.pool for g in seen.gpus})
    if args.pool is not None and args.pool not in pools:
        shown = ", ".join(pools[:8]) or "none"
        raise Refusal(
            "unknown-pool",
            say(
                N_("gpus: no pool named {pool} (pools: {shown})"), pool=repr(args.pool), shown=shown
            ),
        )
    holders = _holders(tx)
    rows: list[dict[str, Any]] = []
    total = 0
    for gpu in seen.gpus:
        if args.pool is not None and gpu.pool != args.pool:
            continue
        holder = holders.get(gpu.uuid)
        state, said = card_words(gpu, seen, holder, rules)
        why = said if isinstance(said, str) else said.english()
        if args.free and state != "free":
            continue
        total += 1
        if len(rows) >= MAX_ROWS:
            continue
        sample = seen.samples.get(gpu.uuid)
        if holder is None and state in ("rogue", "stray"):
            holder = _rogue_holder(sample, seen.exempt_users)
        rows.append(
            {
                "host": gpu.host,
                "index": gpu.index,
                "uuid": gpu.uuid,
                "model": gpu.model,
                "pool": gpu.pool,
                "mig_profile": gpu.mig_profile,
                "mig_parent": gpu.mig_parent,
                "state": state,
                "holder": holder,
                "util": sample.util_gpu if sample is not None else None,
                "mem_used_mib": sample.mem_used_mib if sample is not None else None,
                "mem_total_mib": (sample.mem_total_mib if sample is not None else None)
                or gpu.memory_mib
                or None,
                "why": why,
                **({"why_words": said.wire()} if isinstance(said, Words) else {}),
            }
        )
    return {"gpus": rows, "total": total, "pools": pools, "pool": args.pool}
