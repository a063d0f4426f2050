"""Every problem in the cluster, ranked, with its history: the health view's model.

``HealthBoard.observe`` takes each host snapshot as it comes (from the console's
fleet, or the head's); ``problems`` is then the ranked list: severity, host, GPU,
first and last seen, how many times, what it means, what to do, and whether an admin
acknowledged it. An acknowledgement holds until the problem changes (its severity,
figures or count). The board keeps what a check needs from the past: the last health
reading of each GPU, the minutes in which it showed HW slowdown, its NVLink error
counters, the most GPUs a host has shown.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import words as w
from gputui.health.finding import RANK, Finding
from gputui.health.problems import (
    facts_of,
    gpu_findings,
    gpu_findings_key,
    host_findings,
    orphan_memory,
    sorted_checks,
)
from gputui.health.staleness import snapshot_is_stale
from gputui.health.xid import XidDedupe, action, info
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello

_HOST_ACTIONS = {
    HostStatus.HOST_KEY_CHANGED: N_("verify the new key with the host's admin before trusting it"),
    HostStatus.HOST_KEY_UNKNOWN: N_("verify the key (ssh-keyscan) and add it to known_hosts"),
    HostStatus.AUTH_FAILED: N_("check the SSH user and key for this host"),
    HostStatus.HELPER_ERROR: N_("look at the helper's message; check python3 on the host"),
    HostStatus.NVML_ERROR: N_("check the driver on the host (nvidia-smi)"),
}
_OUTSIDE = "\0outside"
"""Where ``set_outside``'s findings are kept (no host is named so)."""
STALE_MARK = w.STALE_TITLE.format(title="").strip()
"""Ends the title of a GPU's problem while its host sends no fresh readings."""
_LINK_COUNTERS = ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors")
_link_counters: Callable[[object], tuple[int | None, ...]] = operator.attrgetter(*_LINK_COUNTERS)


_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Ack:
    by: str
    note: str
    at: float
    fingerprint: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    finding: Finding
    first_seen: float
    last_seen: float
    count: int
    ack: Ack | None = None

    @property
    def key(self) -> str:
        return self.finding.key

    def fingerprint(self) -> tuple[object, ...]:
        return (self.finding.severity, self.finding.detail, self.count)


@dataclass(frozen=True, slots=True)
class _Checked:
    """One GPU's checks as last run, and what they were run on (``gpu_findings_key``):
    the next sample with the same key has the same answers."""

    key: tuple[object, ...]
    findings: list[Finding]
    unknown: list[tuple[int, str, str]]
    not_applicable: list[tuple[int, str]]
    orphan: bool = False
    """Whether one of ``findings`` is memory held with no process: the key holds that
    it is, not how much (which moves every sample), so that one is made again."""


@dataclass(slots=True)
class Track:
    """How long a problem (a finding's key) has been seen, and how many times it came."""

    first: float
    last: float
    count: int
    active: bool = True
    host: str = ""
    gpu: int | None = None
    code: str = ""
    outside: bool = False
    """Given by ``set_outside`` (the head's knowledge), not by a host's own checks."""


class HealthBoard:
    """Problems across hosts, kept over time."""

    def __init__(
        self, thresholds: HealthThresholds, expected_gpus: Mapping[str, int | None] | None = None
    ) -> None:
        self.thresholds = thresholds
        self.expected = dict(expected_gpus or {})
        self._findings: dict[str, list[Finding]] = {}
        self._seen: dict[str, tuple[float, float, int]] = {}
        """Finding key -> (first, last, count) given by the finding itself (Xids)."""
        self._tracks: dict[str, Track] = {}
        self._by_host: dict[str, set[str]] = {}
        """Host -> the keys of its active tracks from its own checks (not ``set_outside``'s):
        what ``observe`` may end, found without a walk over every track."""
        self._acks: dict[str, Ack] = {}
        self._health: dict[str, dict[str, GpuSample]] = {}
        """Host -> GPU uuid -> its last health reading."""
        self._facts: dict[str, dict[str, tuple[object, ...]]] = {}
        """Host -> GPU uuid -> what the checks read of its last health reading
        (``facts_of``): the same tuple while readings after it are equal in it, so the
        checks' keys compare it by identity."""
        self._slow_minutes: dict[str, dict[str, set[int]]] = {}
        """Host -> GPU uuid -> the minutes it slowed down in (only cards that did)."""
        self._links: dict[str, dict[str, dict[int, tuple[int | None, ...]]]] = {}
        """Host -> GPU uuid -> its NVLinks' error counters at the last health reading.
        These three keep only the GPUs of the host's last sample: a host that names new
        uuids every time does not grow them."""
        self._most_gpus: dict[str, int] = {}
        self._gaps: dict[str, list[_Checked]] = {}
        """Host -> its cards' answers as last checked, in its sample's order (what
        ``unknown`` and ``not_applicable`` list, read from them when asked)."""
        self._outside: set[str] = set()
        """Keys of the findings given by ``set_outside`` (not the hosts' own checks)."""
        self._infos: dict[str, tuple[Hello, dict[int, GpuInfo]]] = {}
        self._checked: dict[str, dict[str, _Checked]] = {}
        """Host -> GPU uuid -> its checks' last answers (run again when their inputs
        change: most samples change none of what the checks read)."""
        self._checked_before: dict[str, dict[str, _Checked]] = {}
        """Host -> GPU uuid -> the answers it had before its last ones, on other
        inputs: a card's samples alternate between two kinds (a health reading one
        in ``health_every_s``, its plain samples in between), and each kind's answers
        are asked for again after the other's."""

    # -- taking readings in ------------------------------------------------------------

    def observe(self, snap: HostSnapshot, now: float) -> None:
        findings = self._host_now(snap, now)
        self._findings[snap.name] = findings
        keys = {f.key for f in findings}
        active = self._by_host.get(snap.name, set())
        for key in active - keys:
            if key not in self._outside:
                self._tracks[key].active = False
        self._by_host[snap.name] = {k for k in keys if k not in self._outside}
        self._touch(findings, now)

    def set_outside(self, findings: list[Finding], now: float) -> None:
        """The problems the hosts' readings cannot show, as another source sees them
        (the head: processes with no job or claim of their owner, idle jobs); each
        call replaces the last."""
        keys = {f.key for f in findings}
        for key in self._outside - keys:
            track = self._tracks.get(key)
            if track is not None:
                track.active = False
        self._outside = keys
        self._findings[_OUTSIDE] = findings
        self._touch(findings, now, outside=True)

    def _touch(self, findings: list[Finding], now: float, *, outside: bool = False) -> None:
        for f in findings:
            known = self._tracks.get(f.key)
            if known is None or not known.active:
                count = 1 if known is None else known.count + 1
                self._tracks[f.key] = Track(now, now, count, True, f.host, f.gpu, f.code, outside)
            else:
                known.last = now

    # -- kept across restarts (the head's store) -------------------------------------------

    def tracks(self) -> dict[str, Track]:
        """Every problem's track (a copy), gone ones too."""
        return {key: replace(track) for key, track in self._tracks.items()}

    def tracks_where(self, keep: Callable[[str, Track], bool]) -> dict[str, Track]:
        """A copy of each track ``keep`` picks (the rest are not copied)."""
        return {key: replace(track) for key, track in self._tracks.items() if keep(key, track)}

    def acks(self) -> dict[str, Ack]:
        return dict(self._acks)

    def restore(self, tracks: Mapping[str, Track], acks: Mapping[str, Ack]) -> None:
        """What an earlier board kept (before any reading comes in): a problem still
        there keeps its first seen and count, and its acknowledgement while unchanged."""
        self._tracks = {key: replace(track) for key, track in tracks.items()}
        self._acks = dict(acks)
        self._outside = {k for k, t in tracks.items() if t.outside and t.active}
        self._by_host = {}
        for key, track in tracks.items():
            if track.active and not track.outside:
                self._by_host.setdefault(key.partition(":")[0], set()).add(key)

    def prune(self, before: float) -> list[str]:
        """Forget the tracks last seen before ``before`` (not showing now); their keys."""
        showing = {f.key for found in self._findings.values() for f in found}
        gone = [k for k, t in self._tracks.items() if t.last < before and k not in showing]
        for key in gone:
            del self._tracks[key]
            self._acks.pop(key, None)
            self._outside.discard(key)
            self._by_host.get(key.partition(":")[0], set()).discard(key)
        return gone

    def seen_before(self, counts: Mapping[str, int]) -> None:
        """How many GPUs each host had before (kept by the head across restarts): fewer
        now is a problem, as if this board had seen them itself."""
        for host, count in counts.items():
            self._most_gpus[host] = max(self._most_gpus.get(host, 0), count)

    def forget(self, host: str) -> None:
        """A host taken out of the config: its problems go."""
        self._findings.pop(host, None)
        self._checked.pop(host, None)
        self._checked_before.pop(host, None)
        self._infos.pop(host, None)
        self._gaps.pop(host, None)
        self._health.pop(host, None)
        self._facts.pop(host, None)
        self._slow_minutes.pop(host, None)
        self._links.pop(host, None)

    def _host_now(self, snap: HostSnapshot, now: float) -> list[Finding]:
        status = snap.status
        if status is HostStatus.NVML_ERROR and snap.hello is not None:
            # NVML did not start: say why in its own words (a driver/library mismatch).
            named = host_findings(snap.name, snap.hello, expected_gpus=None, most_seen=0)
            if named:
                self._gaps.pop(snap.name, None)
                return named
        if status.is_problem and status is not HostStatus.STALE:
            what = snap.message or status.value
            action_text = _HOST_ACTIONS.get(status, N_("check that the host is up and reachable"))
            self._gaps.pop(snap.name, None)
            return [
                Finding(
                    "unreachable",
                    "crit",
                    snap.name,
                    None,
                    w.HOST_STATUS.format(status=status.value),
                    what,
                    action_text,
                    status.value,
                )
            ]
        out: list[Finding] = []
        stale = status is HostStatus.STALE or (
            status is HostStatus.LIVE
            and snapshot_is_stale(snap, now, self.thresholds.stale_after_s)
        )
        if stale:
            age = snap.age(now)
            out.append(
                Finding(
                    "stale",
                    "warn",
                    snap.name,
                    None,
                    N_("no fresh readings")
                    if age is None
                    else w.NO_FRESH_FOR.format(age=f"{age:.0f}"),
                    N_("the host answers slowly or the helper is stuck"),
                    N_("look at the host's load; reconnect if it stays stale"),
                )
            )
        hello = snap.hello
        if hello is not None:
            most = max(self._most_gpus.get(snap.name, 0), len(hello.gpus))
            out += host_findings(
                snap.name,
                hello,
                expected_gpus=self.expected.get(snap.name),
                most_seen=self._most_gpus.get(snap.name, 0),
            )
            self._most_gpus[snap.name] = most
        sample = snap.sample
        infos = self._infos_of(snap.name, hello)
        # Only this sample's GPUs are kept: a host that names new uuids every time
        # does not grow it.
        memo = self._checked.get(snap.name, {})
        memo_before = self._checked_before.get(snap.name, {})
        self._checked[snap.name] = kept = {}
        self._checked_before[snap.name] = kept_before = {}
        answers: list[_Checked] = []  # (in the sample's order, a uuid named twice twice)
        if sample is not None:
            minute = int((sample.time or now) // 60)
            window = self.thresholds.hw_slowdown_window_minutes
            healths = self._health.setdefault(snap.name, {})
            facts = self._facts.setdefault(snap.name, {})
            slows = self._slow_minutes.setdefault(snap.name, {})
            links = self._links.setdefault(snap.name, {})
            for gpu in sample.gpus:
                if gpu.health_read:
                    grew = self._link_growth(gpu, links)
                    healths[gpu.uuid] = gpu
                    said = facts_of(gpu)
                    if facts.get(gpu.uuid) != said:
                        facts[gpu.uuid] = said
                else:
                    grew = []
                minutes = slows.get(gpu.uuid)
                if "hw_slowdown" in (gpu.throttle or ()):
                    if minutes is None:
                        minutes = slows[gpu.uuid] = set()
                    minutes.add(minute)
                if minutes:  # most cards never slow down: nothing to age out
                    for old in [m for m in minutes if m <= minute - window]:
                        minutes.discard(old)
                slow = len(minutes) if minutes else 0
                health = healths.get(gpu.uuid)
                card = infos.get(gpu.index)
                key = gpu_findings_key(
                    snap.name,
                    gpu,
                    health=health,
                    info=card,
                    thresholds=self.thresholds,
                    slowdown_minutes=slow,
                    nvlink_grew=tuple(grew),
                    health_facts=facts.get(gpu.uuid) if health is not None else None,
                )
                known = memo.get(gpu.uuid)
                if known is not None and known.key == key:
                    if gpu.uuid in memo_before:
                        kept_before[gpu.uuid] = memo_before[gpu.uuid]
                else:
                    # The other kind of sample than the last: its answers, if kept.
                    if known is not None:
                        kept_before[gpu.uuid] = known
                    known = memo_before.get(gpu.uuid)
                    if known is None or known.key != key:
                        findings = gpu_findings(
                            snap.name,
                            gpu,
                            health,
                            card,
                            self.thresholds,
                            slowdown_minutes=slow,
                            nvlink_grew=grew,
                        )
                        gaps, moot = sorted_checks(gpu, health, card)
                        index = gpu.index
                        known = _Checked(
                            key,
                            findings,
                            [(index, check, why) for check, why in gaps],
                            [(index, check) for check in moot],
                            any(f.code == "orphan-memory" for f in findings),
                        )
                kept[gpu.uuid] = known
                answers.append(known)
                if known.orphan:  # its figure moves every sample: made again alone
                    out += [
                        orphan_memory(snap.name, gpu) if f.code == "orphan-memory" else f
                        for f in known.findings
                    ]
                else:
                    out += known.findings
            for held in (healths, facts, slows, links):  # (kept, kept_before: the same)
                if len(held) > len(kept):  # a uuid this sample does not name
                    for uuid in [u for u in held if u not in kept]:
                        del held[uuid]
        self._gaps[snap.name] = answers
        if stale:
            # A hung NVML call stops the samples: what the last one showed stays on the
            # board, marked as last known (a critical card does not vanish).
            out = [
                f if f.gpu is None else replace(f, title=w.STALE_TITLE.format(title=f.title))
                for f in out
            ]
        out += self._xids(snap, now)
        out += self._sxids(snap, now)
        return out

    def _infos_of(self, host: str, hello: Hello | None) -> dict[int, GpuInfo]:
        """The hello's GPUs by index (made again only for a new hello)."""
        if hello is None:
            return {}
        known = self._infos.get(host)
        if known is None or known[0] is not hello:
            known = self._infos[host] = (hello, {g.index: g for g in hello.gpus})
        return known[1]

    def _window_start(self, snap: HostSnapshot, now: float) -> float:
        """Xids and SXids older than this do not count: out of the window, or from
        before the host's last boot (a reboot clears what came before it)."""
        since = now - self.thresholds.xid_window_h * 3600
        boot = snap.hello.boot_time if snap.hello is not None else None
        return since if boot is None else max(since, boot)

    def _sxids(self, snap: HostSnapshot, now: float) -> list[Finding]:
        """One finding per NVSwitch and SXid seen within the window: critical when the
        driver calls it fatal."""
        if not snap.events:  # most hosts, most of the time
            return []
        since = self._window_start(snap, now)
        groups: dict[tuple[str, int], list[Event]] = {}
        for event in snap.events:
            if event.sxid is None or event.time is None or event.time < since:
                continue
            groups.setdefault((event.pci_bus_id or "?", event.sxid), []).append(event)
        out = []
        for (switch, code), events in sorted(groups.items()):
            text = events[-1].text
            words = text.lower()
            fatal = "fatal" in words and "non-fatal" not in words
            key = Finding(
                f"sxid-{code}-{switch}",
                "crit" if fatal else "warn",
                snap.name,
                None,
                (w.SXID_FATAL if fatal else w.SXID).format(code=code, switch=switch),
                N_("an NVSwitch error: GPU-to-GPU traffic through that switch may fail"),
                N_("reset the fabric and the GPUs (a reboot); check nvidia-fabricmanager's log")
                if fatal
                else N_("watch it; check nvidia-fabricmanager's log if it repeats"),
                text,
            )
            times = sorted(e.time for e in events if e.time is not None)
            self._seen[key.key] = (times[0], times[-1], len(events))
            out.append(key)
        return out

    @staticmethod
    def _link_growth(
        gpu: GpuSample, links: dict[str, dict[int, tuple[int | None, ...]]]
    ) -> list[int]:
        """The NVLinks whose error counters grew since the last health reading
        (``links``: the host's counters by GPU uuid)."""
        before = links.get(gpu.uuid, {})
        counters = _link_counters
        now = {link.link: counters(link) for link in gpu.nvlinks or ()}
        links[gpu.uuid] = now
        if now == before:  # the common case: no counter moved
            return []
        grew = []
        for index, counts in now.items():
            old = before.get(index)
            if old is None:
                continue
            if any(
                n is not None and o is not None and n > o for n, o in zip(counts, old, strict=True)
            ):
                grew.append(index)
        return grew

    def _xids(self, snap: HostSnapshot, now: float) -> list[Finding]:
        """One finding per GPU and Xid seen within the window, its action escalated by
        how often it came."""
        if not snap.events:  # most hosts, most of the time
            return []
        since = self._window_start(snap, now)
        index_of = {g.uuid: g.index for g in snap.hello.gpus} if snap.hello is not None else {}
        groups: dict[tuple[int | None, int], list[Event]] = {}
        dedupe = XidDedupe()
        for event in snap.events:
            if event.xid is None or event.time is None or event.time < since:
                continue
            gpu = event.gpu_index
            if gpu is None and event.gpu_uuid is not None:
                gpu = index_of.get(event.gpu_uuid)
            # The same Xid from NVML and from the kernel log is one.
            if dedupe.seen(gpu, event.xid, event.time, event.source):
                continue
            groups.setdefault((gpu, event.xid), []).append(event)
        out = []
        escalate = self.thresholds.xid_escalate_after
        for (gpu, code), events in sorted(
            groups.items(), key=lambda kv: (kv[0][0] or -1, kv[0][1])
        ):
            entry = info(code)
            times = sorted(e.time for e in events if e.time is not None)
            finding = Finding(
                f"xid-{code}",
                entry.severity,
                snap.name,
                gpu,
                w.XID_KIND.format(code=code, kind=entry.kind),
                entry.meaning,
                action(code, len(events), escalate),
                events[-1].text,  # the driver's words, e.g. "pid=4242, name=python, Ch 08"
                next((e.gpu_uuid for e in events if e.gpu_uuid), None),
            )
            self._seen[finding.key] = (times[0], times[-1], len(events))
            out.append(finding)
        return out

    # -- reading it out ------------------------------------------------------------------

    def problems(self) -> list[Problem]:
        """Every problem now, worst first (then host, GPU, code); one a key: a host's
        own finding and the head's of the same key are one problem (the worse kept),
        as the header that counts keys and the list must agree."""
        out: list[Problem] = []
        listed: dict[str, int] = {}
        for findings in self._findings.values():
            for finding in findings:
                seen = listed.get(finding.key)
                if seen is not None:
                    if RANK[finding.severity] < RANK[out[seen].finding.severity]:
                        out[seen] = replace(out[seen], finding=finding)
                    continue
                listed[finding.key] = len(out)
                track = self._tracks[finding.key]
                first, last, count = self._seen.get(
                    finding.key, (track.first, track.last, track.count)
                )
                problem = Problem(finding, first, last, count)
                ack = self._acks.get(finding.key)
                if ack is not None:
                    if ack.fingerprint == problem.fingerprint():
                        problem = replace(problem, ack=ack)
                    else:
                        del self._acks[finding.key]  # it changed: no longer acknowledged
                out.append(problem)
        out.sort(
            key=lambda p: (
                RANK[p.finding.severity],
                p.finding.host,
                -1 if p.finding.gpu is None else p.finding.gpu,
                p.finding.code,
            )
        )
        return out

    def count(self) -> int:
        """How many problems ``problems`` lists (one a key), without making the list
        (the head counts them every tick; ``problems`` ranks them all). Unlike
        ``problems``, it leaves the acknowledgements as they are
        (``drop_changed_acks``)."""
        return len({f.key for found in self._findings.values() for f in found})

    def drop_changed_acks(self) -> None:
        """What ``problems`` does to the acknowledgements (drops each whose problem
        changed), without building the list when there is none."""
        if self._acks:
            self.problems()

    def findings_of(self, host: str) -> list[Finding]:
        """The host's own checks' findings now (its cards' and its own)."""
        return list(self._findings.get(host, ()))

    def acknowledge(self, key: str, by: str, note: str, now: float) -> bool:
        """Acknowledge the problem ``key`` (False when there is none such now)."""
        for problem in self.problems():
            if problem.key == key:
                self._acks[key] = Ack(by, note, now, problem.fingerprint())
                return True
        return False

    def unknown(self) -> dict[str, list[tuple[int, str, str]]]:
        """Per host: (GPU index, check, why) for checks that apply to its cards and
        that their readings cannot answer (``applicable.verdict``)."""
        return self._listed(lambda card: card.unknown)

    def not_applicable(self) -> dict[str, list[tuple[int, str]]]:
        """Per host: (GPU index, check) for checks its cards' models have no feature for."""
        return self._listed(lambda card: card.not_applicable)

    def _listed(self, of: Callable[[_Checked], list[_T]]) -> dict[str, list[_T]]:
        """Per host with any: what ``of`` lists of each of its cards' last answers."""
        out = {}
        for host, cards in self._gaps.items():
            if items := [item for card in cards for item in of(card)]:
                out[host] = items
        return out

    def worst(self) -> str:
        """``crit``, ``warn`` or ``ok`` (info-only problems count as ok)."""
        return worst(self.problems())


def worst(problems: Iterable[Problem]) -> str:
    """``crit``, ``warn`` or ``ok`` (info-only problems count as ok): the one rule for a
    board's and an answered report's status."""
    levels = {p.finding.severity for p in problems}
    return "crit" if "crit" in levels else "warn" if "warn" in levels else "ok"
