"""``ClockLocks``: held-but-idle cards' clocks locked low (``power.mode: lock``).

After the meter has counted a host's sample, ``observe`` looks at each of its GPUs:
one the meter calls held but idle (``policy.meter``: held, utilisation and memory
activity 0 for ``power.idle_minutes`` under the same holder) gets its clocks locked
low by its helper (the ``clocks`` request); a locked one is reset the moment a sample
shows it working, its holder changes or goes, or the mode is no longer ``lock``.
One request per GPU at a time. Every lock and reset is audited (``clocks-lock``,
``clocks-reset``) once the host has answered.

A card that cannot be locked (older than Volta, NotSupported, NoPermission) is
reported once, audited once, and never asked again while this head runs (its helper
remembers it too). Another failure (a timeout, a lost link) is tried again no sooner
than ``RETRY_S`` later, never in a loop. What is locked is kept in memory: when the
head stops, its helper sessions end and each helper resets the cards it locked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.config.scheduler import Power
from gputui.scheduler.head.hostops import HostAnswer, HostOps
from gputui.scheduler.policy.meter import Holder, Meter
from gputui.scheduler.server.peer import HEAD_ACTOR
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit
from gputui.telemetry import HostSnapshot

log = logging.getLogger("gputui.scheduler.head.daemon")

RETRY_S = 600.0
"""A lock or reset that failed for a passing reason is tried again after this long."""


@dataclass(frozen=True, slots=True)
class Locked:
    """A card whose clocks the head had locked: for whom, since when, at what clock."""

    host: str
    index: int
    holder: Holder
    at: float
    mhz: int | None


@dataclass(frozen=True, slots=True)
class Ask:
    """One ``clocks`` request: which card, lock or reset, for whose holding, and why."""

    host: str
    index: int
    uuid: str
    action: str
    holder: Holder
    why: str

    @property
    def target(self) -> str:
        return f"{self.host} GPU {self.index} ({self.uuid})"[:128]


def _who(holder: Holder | None) -> str:
    if holder is None:
        return ""
    return holder.user[:64]


def _holding(holder: Holder) -> str:
    return f"job {holder.job}" if holder.job is not None else f"a claim of {holder.user}"


class ClockLocks:
    """Which cards the head locked, which cannot be locked, and what is in flight."""

    def __init__(
        self,
        hosts: HostOps,
        call_tx: Callable[[Callable[[Tx, Any], Any]], Coroutine[Any, Any, Any]],
        spawn: Callable[[Coroutine[Any, Any, Any]], None],
        power: Callable[[], Power],
        *,
        clock: Callable[[], float],
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``changed``: what is locked changed (consoles are pushed the state)."""
        self.hosts = hosts
        self._changed = changed
        self._call_tx = call_tx
        self._spawn = spawn
        self._power = power
        self._clock = clock
        self.locked: dict[str, Locked] = {}
        self.unsupported: dict[str, str] = {}
        """GPU uuid -> why its clocks cannot be locked (reported once)."""
        self.retry_at: dict[str, float] = {}
        self.inflight: set[str] = set()
        self.answers = 0
        """Answers taken (tests wait on it)."""

    def state(self) -> dict[str, Any]:
        """What consoles are shown: the locked cards and those that cannot be."""
        return {
            "clock_locks": [
                {"host": k.host, "index": k.index, "uuid": uuid, "since": k.at, "mhz": k.mhz}
                for uuid, k in sorted(self.locked.items())
            ],
            "clock_unsupported": dict(sorted(self.unsupported.items())),
        }

    def observe(self, snap: HostSnapshot, meter: Meter, holders: Mapping[str, Holder]) -> None:
        sample = snap.sample
        if sample is None:
            return
        power = self._power()
        mode = power.mode
        if mode != "lock" and not self.locked:
            return  # nothing to lock, nothing to reset: no work on the per-sample path
        now = self._clock()
        for gpu in sample.gpus:
            uuid = gpu.uuid
            if uuid in self.inflight or gpu.state == "lost":
                continue
            holder = holders.get(uuid)
            if holder is not None and holder.until is not None:
                holder = None
            idle = holder is not None and meter.held_idle(uuid, now)
            done = self.locked.get(uuid)
            if done is not None:
                why = self._unlock_why(mode, holder, done, idle)
                if why is not None and now >= self.retry_at.get(uuid, now):
                    self._send(Ask(snap.name, gpu.index, uuid, "reset", done.holder, why))
            elif (
                mode == "lock"
                and idle
                and holder is not None
                and uuid not in self.unsupported
                and now >= self.retry_at.get(uuid, now)
            ):
                minutes = power.idle_minutes
                why = f"held by {_holding(holder)}, 0% utilisation for {minutes:g} min or more"
                self._send(Ask(snap.name, gpu.index, uuid, "lock", holder, why))

    @staticmethod
    def _unlock_why(mode: str, holder: Holder | None, done: Locked, idle: bool) -> str | None:
        if holder is None:
            return f"{_holding(done.holder)} ended"
        if holder.since != done.holder.since or holder.job != done.holder.job:
            return f"holder changed to {_holding(holder)}"
        if mode != "lock":
            return f"power.mode is {mode}"
        if not idle:
            return "utilisation rose"
        return None

    def _send(self, ask: Ask) -> None:
        self.inflight.add(ask.uuid)
        self._spawn(self._ask(ask))

    async def _ask(self, ask: Ask) -> None:
        try:
            answer = await self.hosts.clocks(ask.host, ask.index, ask.uuid, ask.action)
        except Exception as exc:  # the link: a failure like any other
            answer = HostAnswer(False, code="internal", message=f"{type(exc).__name__}: {exc}")
        finally:
            self.inflight.discard(ask.uuid)
        before = (set(self.locked), set(self.unsupported))
        outcome = self._take(ask, answer)
        self.answers += 1
        if (set(self.locked), set(self.unsupported)) != before:
            self._changed()
        if outcome is None:
            return
        row = Audit(
            time=self._clock(),
            uid=0,
            user=HEAD_ACTOR,
            action=f"clocks-{ask.action}",
            target=ask.target,
            owner=_who(ask.holder),
            reason=ask.why[:512],
            outcome=outcome[:256],
        )

        def write(tx: Tx, _ctx: Any) -> None:
            tx.audit(row)

        try:
            await self._call_tx(write)
        except Exception as exc:  # the store: the log says it at least
            log.error("head: clocks %s of %s not audited: %s", ask.action, ask.target, exc)

    def _take(self, ask: Ask, answer: HostAnswer) -> str | None:
        """Take the host's answer in; the audit row's outcome (None: nothing to audit)."""
        now, uuid = self._clock(), ask.uuid
        value = answer.value if answer.ok and isinstance(answer.value, dict) else {}
        if answer.ok and value.get("supported") is False:
            self.locked.pop(uuid, None)
            if uuid in self.unsupported:
                return None  # reported already
            why = str(value.get("error") or "NotSupported")
            self.unsupported[uuid] = why
            message = str(value.get("message") or "")[:200]
            log.warning(
                "head: %s cannot lock its clocks (%s%s); not asked again",
                ask.target,
                why,
                f": {message}" if message else "",
            )
            return f"not supported: {why}" + (f" ({message})" if message else "")
        if not answer.ok or value.get("error"):
            self.retry_at[uuid] = now + RETRY_S
            code = answer.code if not answer.ok else value.get("error")
            text = answer.message if not answer.ok else value.get("message", "")
            return f"failed: {code}: {text}; tried again in {RETRY_S / 60:g} min"
        self.retry_at.pop(uuid, None)
        if ask.action == "lock" and value.get("locked"):
            mhz = value.get("mhz")
            mhz = mhz if isinstance(mhz, int) else None
            self.locked[uuid] = Locked(ask.host, ask.index, ask.holder, now, mhz)
            return f"locked at {mhz} MHz" if mhz else "locked"
        self.locked.pop(uuid, None)
        return "reset" if ask.action == "reset" else "not locked"
