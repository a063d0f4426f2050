"""``HeadHealth``: the cluster's health board, kept by the head and kept across restarts.

Every host snapshot goes into one ``HealthBoard`` (``observe``, on the event loop:
its cost is the board's, per snapshot). Once a tick, in the writer's transaction,
``refresh`` gives the board what only the head knows (fences, drains, flagged
processes, idle jobs and claims: ``gputui.health.outside``) and ``write`` stores
what changed: a track that started, ended or changed its count, an acknowledgement
made or dropped, and a track's last seen once a minute (``last_seen_due``: each
track at its own second of it). What was written is taken on only once the batch
is committed (``committed``), so a failed commit is written again on the next tick.
Tracks last seen more than ``KEEP_S`` ago are pruned, and never more than
``MAX_TRACKS`` are kept.

``health`` answers from memory (anyone may read); ``acknowledge`` is for admins,
its row and its audit row in one transaction.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import outside
from gputui.health.board import Ack, HealthBoard, Track, worst
from gputui.health.finding import Finding
from gputui.health.report import not_applicable_json, problem_json, unknown_json
from gputui.scheduler.head.views import json_list
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.lookup import no_host_words
from gputui.scheduler.policy.ownership import Flag
from gputui.scheduler.server.op_args import HealthAckArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import TrackRow, Tx
from gputui.scheduler.store.tables import Audit, Gpu, HealthAck, HealthTrack
from gputui.telemetry import HostSnapshot
from gputui.wire.words import say

LAST_SEEN_S = 60.0
"""A track's last seen is written once in each span of this length, at a mark of its
own, so never this far behind (its other changes at once)."""
KEEP_S = 30 * 86400.0
MAX_TRACKS = 20_000
PRUNE_S = 3600.0


@dataclass(slots=True)
class HealthWrite:
    """One tick's writes, taken on by ``HeadHealth.committed`` once they are durable."""

    tracks: dict[str, Track] = field(default_factory=dict)
    acks: dict[str, Ack | None] = field(default_factory=dict)
    """None: the acknowledgement was dropped (the problem changed or went)."""
    pruned: list[str] = field(default_factory=list)


def _fingerprint(ack: Ack) -> str:
    return orjson.dumps(list(ack.fingerprint)).decode()


def last_seen_due(key: str, stored: float, last: float) -> bool:
    """Whether track ``key``'s last seen is written again: when it moves forward past a
    minute mark (``LAST_SEEN_S``) of the track's own, offset by its key. So the store
    is never a minute behind, and the tracks that began together (every GPU's, when
    the head starts) are not all written again in the same tick each minute, a burst
    of thousands of rows, but spread over it. A clock stepped back writes nothing
    earlier than what is stored."""
    if last <= stored:  # (most tracks, ended ones above all: no hash for them)
        return False
    phase = track_phase(key)
    return (last + phase) // LAST_SEEN_S != (stored + phase) // LAST_SEEN_S


def track_phase(key: str) -> float:
    """The offset of track ``key``'s own minute marks (``last_seen_due``)."""
    return zlib.crc32(key.encode()) % 4096 / 4096 * LAST_SEEN_S


class HeadHealth:
    def __init__(
        self,
        thresholds: HealthThresholds,
        hosts: Iterable[str],
        expected_gpus: Mapping[str, int | None] | None = None,
        *,
        clock: Callable[[], float],
    ) -> None:
        self.board = HealthBoard(thresholds, expected_gpus)
        self.thresholds = thresholds
        self.hosts = set(hosts)
        self.since = clock()
        """Since when this head has watched (its start)."""
        self.idle_claims: dict[int, float] = {}
        """Active claim id -> since when no process of its owner is on its GPUs."""
        self.board_problems = 0
        """How many problems the board listed at the last refresh (the pushed state's
        count: a change of it is a change to push, as a new idle claim is)."""
        self._tracks: dict[str, Track] = {}
        self._acks: dict[str, Ack] = {}
        """What the store holds (as last committed)."""
        self._marks: dict[str, tuple[float, float]] = {}
        """Stored track -> its phase and the minute mark its stored last seen is in
        (``last_seen_due``'s, made once per write of it, not once per track a tick)."""
        self._ack_uids: dict[str, int] = {}
        self._pruned_at = 0.0
        self._flag_findings: dict[tuple[str, int, str, int, str, str, str], Finding] = {}
        """The last refresh's finding of each flagged process, by what it is made of
        (``outside.process_flag`` is pure): the next refresh reuses them."""

    # -- on the event loop ------------------------------------------------------------

    def load(self, tracks: Sequence[HealthTrack], acks: Sequence[HealthAck]) -> None:
        """What the store kept: the board starts from it."""
        self._marks = {}
        self._tracks = {
            t.key: Track(
                t.first_seen, t.last_seen, t.count, t.active, t.host, t.gpu, t.code, t.outside
            )
            for t in tracks
        }
        self._acks = {}
        for a in acks:
            try:
                fingerprint = tuple(orjson.loads(a.fingerprint))
            except (ValueError, TypeError):
                continue  # unreadable: as if never acknowledged
            self._acks[a.key] = Ack(a.by_user, a.note, a.at, fingerprint)
            self._ack_uids[a.key] = a.by_uid
        self.board.restore(self._tracks, self._acks)

    def seen_gpus(self, gpus: Iterable[Gpu]) -> None:
        """The GPUs the store knows of each host, present or not (its inventory, kept
        across restarts): a host that shows fewer now has lost some. Counted by index,
        so a replaced card is not counted twice."""
        indexes: dict[str, set[int]] = {}
        for gpu in gpus:
            indexes.setdefault(gpu.host, set()).add(gpu.index)
        self.board.seen_before({h: len(i) for h, i in indexes.items() if h in self.hosts})

    def observe(self, snap: HostSnapshot, now: float) -> None:
        if snap.name in self.hosts:
            self.board.observe(snap, now)

    def state(self) -> dict[str, Any]:
        """For the pushed state: idle claims, how long before one is a finding, and how
        many problems the board lists (the console's header counts what its health view
        lists)."""
        return {
            "idle_claims": [{"id": i, "idle_since": t} for i, t in self.idle_claims.items()],
            "claim_idle_after_s": self.thresholds.claim_idle_minutes * 60,
            "board_problems": self.board_problems,
        }

    def answer(self, hosts: Sequence[str]) -> dict[str, Any]:
        """The ``health`` op's answer: the board, of ``hosts`` only when given."""
        unknown_hosts = [h for h in hosts if h not in self.hosts]
        if unknown_hosts:
            raise Refusal("unknown-host", no_host_words(unknown_hosts[0], self.hosts))
        only = set(hosts) or self.hosts
        problems = [p for p in self.board.problems() if p.finding.host in only]
        unknown = {h: items for h, items in self.board.unknown().items() if h in only}
        na = {h: items for h, items in self.board.not_applicable().items() if h in only}
        return {
            "status": worst(problems),
            "hosts": len(only),
            "problems": [problem_json(p) for p in problems],
            "unknown": unknown_json(unknown),
            "not_applicable": not_applicable_json(na),
            "since": self.since,
        }

    # -- in the writer's transaction ----------------------------------------------------

    def refresh(
        self, tx: Tx, now: float, watch: HostWatch, flags: Sequence[Flag], idle_after_s: float
    ) -> bool:
        """The head's own findings onto the board; True when the idle claims or the
        board's count changed (the consoles are shown both)."""
        found: list[Finding] = []
        for g in watch.present_gpus():
            if g.fenced:
                found.append(outside.fenced(g.host, g.index, g.uuid, g.fence_reason or ""))
            elif g.drained or watch.host_drained(g.host):
                why = (g.drain_reason or "") if g.drained else "its host is drained"
                found.append(outside.drained(g.host, g.index, g.uuid, why))
        made: dict[tuple[str, int, str, int, str, str, str], Finding] = {}
        for flag in flags:
            p = flag.proc
            key = (p.host, p.gpu_index, p.gpu_uuid, p.pid, p.owner, p.name, flag.kind)
            # A flagged process stays flagged tick after tick: its finding is made once.
            flagged = self._flag_findings.get(key) or outside.process_flag(*key)
            made[key] = flagged
            found.append(flagged)
        self._flag_findings = made
        for job in tx.jobs(("running",)):
            if job.idle_since is not None and job.host and job.id is not None:
                idle = now - job.idle_since
                if idle >= idle_after_s:
                    found.append(outside.idle_job(job.host, job.id, job.user, idle))
        active = watch.active_users()
        idle_claims: dict[int, float] = {}
        after_s = self.thresholds.claim_idle_minutes * 60
        for claim in tx.claims(("active",)):
            uuids = [str(u) for u in json_list(claim.gpu_uuids)]
            since = claim.last_active_at or claim.granted_at
            if claim.id is None or since is None:
                continue
            if any(claim.uid in active.get(u, ()) for u in uuids):
                continue
            idle_claims[claim.id] = since
            finding = outside.claim_idle(
                claim.host,
                claim.id,
                claim.user,
                idle_since=since,
                now=now,
                after_s=after_s,
                session=claim.session is not None,
                idle_release_s=claim.idle_release_s,
            )
            if finding is not None:
                found.append(finding)
        self.board.set_outside([f for f in found if f.host in self.hosts], now)
        # The hosts' own problems come in between refreshes (``observe``): counted here
        # (``write``, next in the same batch, drops the acknowledgements that changed).
        count = self.board.count()
        changed = idle_claims != self.idle_claims or count != self.board_problems
        self.idle_claims, self.board_problems = idle_claims, count
        return changed

    def write(self, tx: Tx, now: float) -> HealthWrite:
        """Store what changed since the last committed write."""
        self.board.drop_changed_acks()
        out = HealthWrite()
        if now - self._pruned_at >= PRUNE_S:
            self._pruned_at = now
            out.pruned = self._prune(now)
        out.tracks = self.board.tracks_where(self._differs)
        acks = self.board.acks()
        out.acks = {k: a for k, a in acks.items() if self._acks.get(k) != a}
        out.acks.update({k: None for k in self._acks if k not in acks and k not in out.pruned})
        rows = [
            TrackRow(
                key=k,
                host=t.host[:64],
                gpu=t.gpu,
                code=t.code[:64],
                first_seen=t.first,
                last_seen=t.last,
                count=t.count,
                active=t.active,
                outside=t.outside,
            )
            for k, t in out.tracks.items()
        ]
        ack_rows = [self._ack_row(k, a) for k, a in out.acks.items() if a is not None]
        gone = [k for k, a in out.acks.items() if a is None]
        tx.health.drop(out.pruned, out.pruned)
        tx.health.put(rows, ack_rows, gone)
        return out

    def _differs(self, key: str, new: Track) -> bool:
        """Whether track ``key`` is written this tick: new, changed, or its last seen
        due (``last_seen_due``, with the stored side's mark kept)."""
        old = self._tracks.get(key)
        if old is None:
            return True
        if (
            old.first != new.first
            or old.count != new.count
            or old.active != new.active
            or old.outside != new.outside
        ):
            return True
        if new.last <= old.last:
            return False
        mark = self._marks.get(key)
        if mark is None:
            phase = track_phase(key)
            mark = self._marks[key] = (phase, (old.last + phase) // LAST_SEEN_S)
        return (new.last + mark[0]) // LAST_SEEN_S != mark[1]

    def committed(self, done: HealthWrite) -> None:
        self._tracks.update(done.tracks)
        for key in done.tracks:
            self._marks.pop(key, None)
        for key in done.pruned:
            self._tracks.pop(key, None)
            self._marks.pop(key, None)
            self._acks.pop(key, None)
        for key, ack in done.acks.items():
            if ack is None:
                self._acks.pop(key, None)
            else:
                self._acks[key] = ack

    def _prune(self, now: float) -> list[str]:
        gone = self.board.prune(now - KEEP_S)
        tracks = self.board.tracks()
        excess = len(tracks) - MAX_TRACKS
        if excess > 0:
            ended = sorted(t.last for t in tracks.values() if not t.active)
            if ended:
                gone += self.board.prune(ended[min(excess, len(ended)) - 1] + 1e-6)
        return gone

    def _ack_row(self, key: str, ack: Ack) -> HealthAck:
        return HealthAck(
            key=key,
            by_uid=self._ack_uids.get(key, 0),
            by_user=ack.by[:64],
            note=ack.note[:512],
            at=ack.at,
            fingerprint=_fingerprint(ack),
        )

    def acknowledge(
        self, tx: Tx, caller: Caller, args: HealthAckArgs, now: float
    ) -> dict[str, Any]:
        """An admin acknowledges a problem there is now; its ack and audit rows together."""
        if not caller.admin:
            raise Refusal(
                "denied", say(N_("health-ack {key}: only an admin may acknowledge"), key=args.key)
            )
        note = " ".join(args.note.split())[:512]
        problem = next((p for p in self.board.problems() if p.key == args.key), None)
        if problem is None:
            raise Refusal(
                "unknown-problem",
                say(
                    N_(
                        "health-ack {key}: no such problem now (gputui health --json lists the"
                        " keys)"
                    ),
                    key=args.key,
                ),
            )
        f = problem.finding
        ack = Ack(caller.user[:64], note, now, problem.fingerprint())
        self._ack_uids[f.key] = caller.uid
        tx.health.put((), [self._ack_row(f.key, ack)])
        where = f.host if f.gpu is None else f"{f.host}:{f.gpu}"
        tx.audit(
            Audit(
                time=now,
                uid=caller.uid,
                user=caller.user[:64],
                action="health-ack",
                target=f"{where} {f.code}"[:128],
                reason=note,
                outcome="acknowledged",
            )
        )
        self.board.acknowledge(f.key, ack.by, note, now)
        return {"key": f.key, "acknowledged": {"by": ack.by, "note": note, "at": now}}
