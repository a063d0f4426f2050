"""``HostWatch``: what the head knows of its hosts beyond the store.

Which hosts answer, which GPUs their last sample called healthy, whose processes
run on each GPU, and the GPU inventory (cached from the store). The daemon feeds
it every snapshot; it answers with the items the daemon's writer must apply
(a host gone, a new inventory, a host's list of runs) and builds the GPU slots
placement sees, again only when something changed. A GPU's slot is drained when
an admin drained it or its host, and fenced (never healthy) while the head's own
fence holds (``fences``): the health rules judge each sample of a live host, and
each condition from the latest reading of it (a GPU's latest health reading is kept
here, ``LatestReadings``: only one sample in ``health_every_s`` carries one).

The inventory is kept as frozen copies (``GpuFacts``), never as the store's rows: a
row would be expired and detached by the batches that follow. A batch's changes to
it are undone with the batch when it is not committed (``begin``/``undo``).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from gputui.config.models import HealthThresholds
from gputui.config.scheduler import Placement
from gputui.health.fencing import LatestReadings, Verdict, fence_reasons
from gputui.health.finding import Finding
from gputui.scheduler.head import fences
from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.watch import cards
from gputui.scheduler.head.watch.readings import History
from gputui.scheduler.head.watch.slices import Card, cards_of, on_slices, with_slices
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy import ownership
from gputui.scheduler.policy.cards import CardProblem, judged
from gputui.scheduler.policy.vendors import card_pool
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Gpu, Host
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuSample, ProcessSample, Sample


@dataclass(slots=True)
class _Host:
    live: bool = False
    healthy: dict[str, bool] = field(default_factory=dict)
    """uuid -> whether its last sample said ``ok``."""
    users_on: dict[str, set[int]] = field(default_factory=dict)
    jobs_seen: tuple[Any, ...] | None = None
    down_reported: bool = False
    sample: Sample | None = None
    """The latest sample (its processes and utilisation: ownership and idle flags)."""
    samples: int = 0
    """How many distinct samples came: a process flagged in two of them is confirmed."""
    readings: LatestReadings = field(default_factory=LatestReadings)
    """The latest health reading of each of its GPUs (the fences judge those)."""
    problems: dict[str, tuple[CardProblem, ...]] = field(default_factory=dict)
    """What is wrong with each of its cards that has anything (``cards``)."""
    kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    """``_kinds(problems)``: what placement reads of them (kept with them, not made
    again to compare with the next sample's)."""
    inventory_as: tuple[object, str, tuple[GpuFacts, ...], int] | None = None
    """(hello, the host's pool, the facts of every stored GPU that names the host, the
    inventory's generation) last found to match: while the same hello meets the very
    same facts (a change of a GPU's row replaces its facts) and no other row names the
    host, the inventory needs no new look (``observe``), however the rest of the fleet
    moves; while the generation has not moved, nothing of it was looked at again."""


@dataclass(frozen=True, slots=True)
class FenceNews:
    """A host's GPUs as the health rules judge them now (``HostWatch.observe``)."""

    host: str
    verdicts: dict[str, Verdict]
    boot_time: float | None
    xid_times: dict[str, dict[int, float]]


class HostWatch:
    def __init__(
        self,
        host_pools: Mapping[str, str],
        reports: Callable[[HostSnapshot], tuple[Any, ...] | None],
        *,
        clock: Callable[[], float] = time.time,
        thresholds: HealthThresholds | None = None,
        placement: Placement | None = None,
        exempt_users: Collection[str] = (),
    ) -> None:
        self.host_pools = dict(host_pools)
        self._reports = reports
        self._clock = clock
        self._thresholds = thresholds or HealthThresholds()
        self._placement = placement or Placement()
        self._exempt = frozenset(exempt_users)
        self._hosts: dict[str, _Host] = {name: _Host() for name in host_pools}
        self._gpus: dict[str, GpuFacts] = {}
        self._on_host: dict[str, dict[str, None]] = {}
        """Host -> the uuids of ``_gpus`` whose row names it, in ``_gpus``' order (``_keep``,
        ``_index``)."""
        self._vendors: dict[str, str] = {}
        """GPU uuid -> its vendor, as its host's ``hello`` says (NVIDIA's where none
        has: placement keeps other vendors' cards to their own pools)."""
        self._drained_hosts: set[str] = set()
        self._before: tuple[dict[str, GpuFacts], set[str]] | None = None
        """The inventory as the last commit left it, while a batch changes it."""
        self._slots: tuple[policy.GpuSlot, ...] = ()
        self._slots_of: dict[str, tuple[policy.GpuSlot, ...]] = {}
        """Host -> its GPUs' slots, by index (``slots`` joins them in host order)."""
        self._dirty = True
        """Every host's slots are built again at the next ``slots``."""
        self._dirty_hosts: set[str] = set()
        """These hosts' slots are built again at the next ``slots`` (what a sample or a
        batch changed: while a fleet connects, each batch brings a few new hosts, and
        building every GPU's slot again each time was most of the writer's work)."""
        self._generation = 0
        """Moves on whenever the GPU inventory may have changed (load, a batch's
        change, an undo): what a host's last inventory check was made against."""
        self.history = History()
        """What each GPU read lately (``gputui incident``)."""
        self._fences_as: dict[str, tuple[tuple[object, ...], FenceNews | None]] = {}
        """Host -> ``_fence_news``' last answer and what it was made from."""
        self._active: dict[str, set[int]] | None = None
        """``active_users``' answer, until a host's users change (None: made again)."""
        self._procs_of: dict[str, tuple[ownership.GpuProc, ...]] = {}
        """``gpu_processes_by_host``' answer of the last call."""

    def load(self, gpus: Iterable[Gpu], hosts: Iterable[Host] = ()) -> None:
        """The store's rows, copied (inside their transaction)."""
        self._gpus = {g.uuid: GpuFacts.of(g) for g in gpus}
        self._index()
        self._drained_hosts = {h.name for h in hosts if h.drained}
        self._dirty = True
        self._generation += 1

    def begin(self) -> None:
        """A batch starts: what it changes here is undone unless it is committed."""
        self._before = None

    def undo(self) -> None:
        """The batch was not committed: the inventory as the last commit left it."""
        if self._before is not None:
            self._gpus, self._drained_hosts = self._before
            self._index()
            self._before = None
            self._dirty = True
            self._generation += 1

    def _changing(self) -> None:
        if self._before is None:
            self._before = (dict(self._gpus), set(self._drained_hosts))
        self._generation += 1

    def _index(self) -> None:
        self._on_host = {}
        for uuid, facts in self._gpus.items():
            self._on_host.setdefault(facts.host, {})[uuid] = None

    def _keep(self, facts: GpuFacts) -> None:
        """``facts`` as its GPU's row now is (inside the writer's batch)."""
        was = self._gpus.get(facts.uuid)
        if was is not None and was.host != facts.host:
            self._on_host.get(was.host, {}).pop(facts.uuid, None)
            self._dirty_hosts.add(was.host)
        self._on_host.setdefault(facts.host, {})[facts.uuid] = None
        self._dirty_hosts.add(facts.host)
        self._gpus[facts.uuid] = facts

    def remember(self, gpus: Iterable[Gpu] = (), host: Host | None = None) -> None:
        """Rows the writer changed (a drain, a fence), copied inside its transaction:
        slots are built again."""
        self._changing()
        for gpu in gpus:
            self._keep(GpuFacts.of(gpu))
        self._generation += 1  # (again once changed: nothing looked in between counts)
        if host is not None:
            if host.drained:
                self._drained_hosts.add(host.name)
            else:
                self._drained_hosts.discard(host.name)
            self._dirty_hosts.add(host.name)

    def host_drained(self, name: str) -> bool:
        return name in self._drained_hosts

    # -- what the daemon reads ---------------------------------------------------------

    def present_gpus(self) -> list[GpuFacts]:
        return [g for g in self._gpus.values() if g.present]

    def live(self) -> dict[str, bool]:
        return {name: h.live for name, h in self._hosts.items()}

    def active_users(self) -> Mapping[str, AbstractSet[int]]:
        """GPU uuid -> the uids with a process on it in its host's last sample. The
        same mapping until a host's users change (read it, never change it): the timer
        asks every tick, and most ticks no host's users changed."""
        if self._active is None:
            self._active = {
                u: users for h in self._hosts.values() for u, users in h.users_on.items()
            }
        return self._active

    def samples(self) -> dict[str, tuple[int, Sample]]:
        """Live host -> (its sample count, its latest sample)."""
        return {
            name: (h.samples, h.sample)
            for name, h in self._hosts.items()
            if h.live and h.sample is not None
        }

    def fleet(self) -> dict[str, tuple[bool, Sample | None, dict[str, GpuSample]]]:
        """Every host -> whether it answers, its latest sample (frozen) and a copy of
        its GPUs' latest health readings (frozen): for ``/metrics``."""
        return {
            name: (h.live, h.sample, dict(h.readings.as_map())) for name, h in self._hosts.items()
        }

    def inventory(self) -> tuple[dict[str, GpuFacts], frozenset[str]]:
        """A copy of the GPU inventory (frozen facts) and the drained hosts' names."""
        return dict(self._gpus), frozenset(self._drained_hosts)

    def gpu_processes(self) -> list[ownership.GpuProc]:
        """Every process on every GPU of the live hosts, as their latest samples say."""
        return [p for procs in self.gpu_processes_by_host().values() for p in procs]

    def gpu_processes_by_host(self) -> dict[str, tuple[ownership.GpuProc, ...]]:
        """Each live host's processes on its GPUs, as its latest sample says.

        A host whose processes are listed as at the last call keeps the same tuple of
        the same ``GpuProc`` (most hosts, tick after tick: made again, they were most
        of ownership's work; and a host's list of the same objects tells
        ``ownership.step_hosts`` that nothing of it changed). Of a host whose list
        changed, a process listed as before is still the ``GpuProc`` made then."""
        before, by_host = self._procs_of, {}
        for name, (_, sample) in self.samples().items():
            kept = before.get(name, ())
            by_host[name] = kept if _lists(kept, sample) else _made(name, sample, kept)
        self._procs_of = by_host  # only the hosts live now: it never grows past them
        return dict(by_host)

    def gpu_state(self, uuid: str) -> str | None:
        """The GPU's state (``ok``, ``lost``, ``error``) in its live host's latest
        sample (None: no live host's sample lists it)."""
        for _, sample in self.samples().values():
            for g in with_slices(sample.gpus):
                if g.uuid == uuid:
                    return g.state
        return None

    def gpu_util(self) -> dict[str, int | None]:
        """GPU uuid -> its utilisation (%) in its live host's latest sample."""
        return {
            g.uuid: g.util_gpu if g.state == "ok" else None
            for _, sample in self.samples().values()
            for g in with_slices(sample.gpus)
        }

    def card_problems(self) -> dict[str, tuple[CardProblem, ...]]:
        """GPU uuid -> what is wrong with it now (only those with anything), from
        the live hosts' latest samples and health findings (``cards``)."""
        return {u: found for h in self._hosts.values() if h.live for u, found in h.problems.items()}

    def slots(self) -> tuple[policy.GpuSlot, ...]:
        """Every present GPU as placement sees it (rebuilt only after a change): its
        problems put it last or keep it out (``scheduler.placement``)."""
        if self._dirty:
            self._slots_of.clear()
            built: Iterable[str] = self._on_host
        elif self._dirty_hosts:
            built = self._dirty_hosts
        else:
            return self._slots
        for name in built:
            slots = self._host_slots(name)
            if slots:
                self._slots_of[name] = slots
            else:
                self._slots_of.pop(name, None)
        self._slots = tuple(
            slot for name in sorted(self._slots_of) for slot in self._slots_of[name]
        )
        self._dirty = False
        self._dirty_hosts = set()
        return self._slots

    def _host_slots(self, name: str) -> tuple[policy.GpuSlot, ...]:
        """The slots of the GPUs present on host ``name``, by index."""
        slots = []
        rules = self._placement
        host = self._hosts.get(name)
        for uuid in self._on_host.get(name, ()):
            gpu = self._gpus[uuid]
            if not gpu.present:
                continue
            healthy = host is not None and host.live and host.healthy.get(gpu.uuid, False)
            # A MIG slice is drained and fenced with its card (an admin's drain of
            # the card, the head's fence for an Xid on it), as well as on its own.
            card = self._gpus.get(gpu.mig_parent) if gpu.mig_parent else None
            drained = gpu.drained or (card is not None and card.drained)
            fenced = gpu.fenced or (card is not None and card.fenced)
            slot = policy.GpuSlot(
                uuid=gpu.uuid,
                host=gpu.host,
                index=gpu.index,
                pool=gpu.pool,
                model=gpu.model,
                drained=drained or gpu.host in self._drained_hosts,
                healthy=healthy and not fenced,
                fenced=fenced,
                vendor=self._vendors.get(gpu.uuid, policy.DEFAULT_VENDOR),
                mig_profile=gpu.mig_profile,
                mig_enabled=gpu.mig_enabled,
            )
            found = host.problems.get(gpu.uuid) if host is not None else None
            slots.append(judged(slot, (p.kind for p in found), rules) if found else slot)
        slots.sort(key=lambda s: s.index)
        return tuple(slots)

    # -- what hosts say ----------------------------------------------------------------

    def observe(
        self, snap: HostSnapshot, findings: Sequence[Finding] = ()
    ) -> list[tuple[str, Any]]:
        """Take in one snapshot (``findings``: the health board's for its host now);
        the (kind, payload) items the writer must apply."""
        out: list[tuple[str, Any]] = []
        self.history.record(snap)
        host = self._hosts.get(snap.name)
        if host is None:  # (not made to be thrown away on every sample)
            host = self._hosts[snap.name] = _Host()
        live = snap.status in (HostStatus.LIVE, HostStatus.STALE) and snap.hello is not None
        changed = False
        if live != host.live:
            host.live, changed = live, True
            if live:
                host.down_reported = False
        if not live and snap.status.is_problem and not host.down_reported:
            host.down_reported = True
            out.append(("host-down", (snap.name, snap.message or snap.status.value)))
        pool = self.host_pools.get(snap.name, "default")
        if snap.hello is not None and not self._inventory_holds(snap.name, snap.hello, pool):
            inventory = cards_of(snap.hello.gpus)
            for c in inventory:
                if self._vendors.get(c.uuid, policy.DEFAULT_VENDOR) != c.vendor:
                    self._vendors[c.uuid] = c.vendor
                    changed = True
            known = {
                u: (
                    row.index,
                    row.model,
                    row.pool,
                    row.mig_profile,
                    row.mig_parent,
                    row.mig_enabled,
                )
                for u in self._on_host.get(snap.name, ())
                if (row := self._gpus[u]).present
            }
            said = {
                c.uuid: (
                    c.card_index,
                    c.model,
                    card_pool(pool, c.vendor, c.model),
                    c.mig_profile,
                    c.mig_parent,
                    c.mig_enabled,
                )
                for c in inventory
            }
            if said != known:
                out.append(("inventory", (snap.name, inventory)))
                host.inventory_as = None
            else:
                on_host = self._on_host.get(snap.name, ())
                facts = tuple(self._gpus[u] for u in on_host)
                host.inventory_as = (snap.hello, pool, facts, self._generation)
        if snap.sample is not None:
            units = list(with_slices(snap.sample.gpus))
            healthy = {g.uuid: g.state == "ok" for g in units}
            if healthy != host.healthy:
                host.healthy, changed = healthy, True
            users_on = {g.uuid: {p.uid for p in g.processes if p.uid is not None} for g in units}
            if users_on != host.users_on:
                host.users_on, self._active = users_on, None
            if snap.sample is not host.sample:
                host.sample, host.samples = snap.sample, host.samples + 1
                host.readings.take(snap.sample)
            problems = cards.of_host(snap.sample, findings, self._exempt)
            kinds = _kinds(problems)
            if kinds != host.kinds:
                changed = True
            host.problems, host.kinds = problems, kinds
            if live:
                news = self._fence_news(snap, host.readings)
                if news is not None:
                    out.append(("fences", news))
        jobs = self._reports(snap)
        if jobs is not None and jobs is not host.jobs_seen and live:
            host.jobs_seen = jobs
            out.append(("reports", (snap.name, list(jobs))))
        if changed:
            self._dirty_hosts.add(snap.name)
        if self._dirty or self._dirty_hosts:
            # GPUs came or went: an item of its own wakes the writer, whose batch
            # always ends in a scheduling pass (the item itself does nothing).
            out.append(("wake", None))
        return out

    def _fence_news(self, snap: HostSnapshot, readings: LatestReadings) -> FenceNews | None:
        """What the health rules say of this live host's GPUs (each condition from the
        latest reading of it), when that would change a fence (or an admin's waiver):
        for the writer to apply (``put_fences``).

        The answer is kept while what it is made from is unchanged (``_fence_key``):
        the host's hello and events, what the rules read of each GPU, and the
        inventory (a change of it moves ``_generation``)."""
        assert snap.sample is not None
        key = self._fence_key(snap, readings)
        known = self._fences_as.get(snap.name)
        if known is not None and known[0] == key:
            return known[1]
        news = self._fence_news_afresh(snap, readings)
        self._fences_as[snap.name] = (key, news)
        return news

    def _fence_key(self, snap: HostSnapshot, readings: LatestReadings) -> tuple[object, ...]:
        """What ``fence_reasons`` and ``fences.plan_host`` read: the inventory's
        generation, the hello (its boot time), the events (Xids) and, of each GPU, its
        uuid, state, ECC count, whether it is idle and its latest health reading (the
        same object until the next one). Not the time: neither reads it."""
        assert snap.sample is not None
        latest = readings.as_map()
        gpus = tuple(
            (
                *_fence_fields(g),
                not g.processes and (g.util_gpu or 0) == 0,
                g if g.health_read else latest.get(g.uuid),
            )
            for g in snap.sample.gpus
        )
        return (self._generation, self._thresholds, snap.hello, snap.events, gpus)

    def _fence_news_afresh(self, snap: HostSnapshot, readings: LatestReadings) -> FenceNews | None:
        """``_fence_news`` made from the rules (not kept)."""
        verdicts = fence_reasons(snap, self._clock(), self._thresholds, readings.as_map())
        boot_time = snap.hello.boot_time if snap.hello is not None else None
        xid_times: dict[str, dict[int, float]] = {}
        for event in snap.events:
            if event.xid is not None and event.gpu_uuid is not None and event.time is not None:
                times = xid_times.setdefault(event.gpu_uuid, {})
                times[event.xid] = max(times.get(event.xid, event.time), event.time)
        assert snap.sample is not None
        # The sample's own GPUs (not a scan of the cluster's: this runs on every sample).
        known = (self._gpus.get(g.uuid) for g in snap.sample.gpus)
        rows = [g for g in known if g is not None and g.host == snap.name]
        if not fences.plan_host(rows, verdicts, boot_time=boot_time, xid_times=xid_times):
            return None
        return FenceNews(snap.name, verdicts, boot_time, xid_times)

    def put_fences(self, tx: Tx, news: FenceNews, now: float) -> None:
        """Fence and unfence a host's GPUs as ``news`` says (planned again on the store's
        rows); the cache takes the store's rows of that host."""
        fences.apply(
            tx,
            news.host,
            news.verdicts,
            boot_time=news.boot_time,
            xid_times=news.xid_times,
            now=now,
        )
        self.remember(g for g in tx.gpus() if g.host == news.host)

    def _inventory_holds(self, name: str, hello: object, pool: str) -> bool:
        """Whether ``hello`` was found to match this host's stored GPUs as they are: the
        same rows name the host (none came, none left) and none of them changed."""
        host = self._hosts[name]
        held = host.inventory_as
        if held is None or held[1] != pool or (held[0] is not hello and held[0] != hello):
            return False
        if held[3] == self._generation:  # no row changed since (nearly every sample)
            return True
        gpus = self._gpus
        if len(self._on_host.get(name, ())) == len(held[2]) and all(
            gpus.get(facts.uuid) is facts for facts in held[2]
        ):
            host.inventory_as = (*held[:3], self._generation)
            return True
        return False

    def put_inventory(self, tx: Tx, host: str, gpus: list[Card]) -> None:
        """Store a host's GPUs (and MIG slices) as its ``hello`` lists them; those gone
        are not present. An AMD card's pool is its own (``vendors.card_pool``), not the
        host's. A GPU stored as the hello says is not written again; the rows of those
        to write are read in one query, not one each."""
        self._changing()
        seen = set()
        pool = self.host_pools.get(host, "default")
        writes = []
        for card in gpus:
            seen.add(card.uuid)
            facts = (
                host, card.card_index, card.model, card.memory_mib, card.mig_profile,
                card.mig_parent, card.mig_enabled, card_pool(pool, card.vendor, card.model), True,
            )  # fmt: skip
            kept = self._gpus.get(card.uuid)
            if kept is None or _inventory_facts(kept) != facts:
                writes.append((card, facts))
        rows = tx.gpus_by_uuid([card.uuid for card, _ in writes]) if writes else {}
        fresh = []
        for card, facts in writes:
            row = rows.get(card.uuid)
            if row is None:  # inserted below, all in one statement
                fresh.append({"uuid": card.uuid, **dict(zip(_INVENTORY, facts, strict=True))})
                continue
            (
                row.host, row.index, row.model, row.memory_mib, row.mig_profile,
                row.mig_parent, row.mig_enabled, row.pool, row.present,
            ) = facts  # fmt: skip
            self._keep(GpuFacts.of(tx.put_gpu(row)))
        if fresh:
            tx.add_gpus(fresh)
            for columns in fresh:
                self._keep(GpuFacts.fresh(columns))
        for uuid in list(self._on_host.get(host, ())):
            kept = self._gpus[uuid]
            if kept.host == host and uuid not in seen and kept.present:
                gone = tx.gpu(uuid)
                if gone is not None:
                    gone.present = False
                    self._keep(GpuFacts.of(tx.put_gpu(gone)))
        self._generation += 1  # (again once changed: nothing looked in between counts)


_INVENTORY = (
    "host", "index", "model", "memory_mib", "mig_profile", "mig_parent", "mig_enabled",
    "pool", "present",
)  # fmt: skip
_inventory_facts: Callable[[GpuFacts], tuple[object, ...]] = operator.attrgetter(*_INVENTORY)
"""What a host's ``hello`` says of a GPU (``HostWatch.put_inventory``)."""


_fence_fields: Callable[[GpuSample], tuple[object, ...]] = operator.attrgetter(
    "uuid", "state", "ecc_uncorrected"
)
"""What the fencing rules read of a sample's GPU as it is (``HostWatch._fence_key``)."""


def _lists(kept: tuple[ownership.GpuProc, ...], sample: Sample) -> bool:
    """Whether ``sample`` lists exactly the processes of ``kept``, in its order (a MIG
    card's processes go to its slices: such a host is made again). Field by field,
    what ``_key_of`` makes, stopping at the first difference: twice as fast as making
    and comparing the keys, for every process of the fleet each sweep."""
    i, n = 0, len(kept)
    for g in sample.gpus:
        if g.mig:
            return False
        uuid, index = g.uuid, g.index
        for p in g.processes:
            if i == n:
                return False
            k = kept[i]
            i += 1
            if (
                k.pid != p.pid
                or k.gpu_index != index
                or k.gpu_uuid != uuid
                or k.uid != p.uid
                or k.user != p.user
                or k.name != p.command
                or k.start_ticks != p.start_ticks
                or k.container != p.container
                or k.graphics != (p.kind == "graphics")
            ):
                return False
    return i == n


def _made(
    name: str, sample: Sample, kept: tuple[ownership.GpuProc, ...]
) -> tuple[ownership.GpuProc, ...]:
    """A host's processes as ``sample`` lists them, each listed as in ``kept`` the
    ``GpuProc`` made then."""
    before = {_proc_key(k): k for k in kept}
    out = []
    for g in on_slices(sample.gpus):
        for p in g.processes:
            key = _key_of(g, p)
            proc = before.get(key)
            if proc is None:
                proc = ownership.GpuProc(name, *key)
            out.append(proc)
    return tuple(out)


_PROC_FIELDS = (
    "gpu_uuid", "gpu_index", "pid", "uid", "user", "name", "start_ticks", "graphics", "container"
)  # fmt: skip
"""What ``GpuProc`` holds of a process and its card, after its host, in its order."""
_ProcFacts = tuple[str, int, int, int | None, str | None, str, int | None, bool, str | None]
_proc_key: Callable[[ownership.GpuProc], _ProcFacts] = operator.attrgetter(*_PROC_FIELDS)


def _key_of(g: GpuSample, p: ProcessSample) -> _ProcFacts:
    """What a ``GpuProc`` of process ``p`` on card ``g`` holds (``_PROC_FIELDS``)."""
    graphics = p.kind == "graphics"
    return (g.uuid, g.index, p.pid, p.uid, p.user, p.command, p.start_ticks, graphics, p.container)


def _kinds(problems: Mapping[str, tuple[CardProblem, ...]]) -> dict[str, frozenset[str]]:
    """What placement reads of a host's problems (their kinds, not their figures)."""
    return {u: frozenset(p.kind for p in found) for u, found in problems.items()}
