"""Whose processes may run on which GPU, and which jobs sit idle: pure decisions.

No I/O and no database here. ``head.watch.flags.FlagWatch`` feeds these functions the live
allocations (from the store), the processes on every GPU (from the hosts' latest
samples) and the ``scheduler:`` settings, and acts on what comes back.

A process is *flagged* when its owner holds neither a job nor a claim on its GPU:

- ``no-allocation``: its owner holds nothing at all on that host;
- ``outside-allocation``: its owner holds a job or claim on that host, but not on
  this GPU (a job process that got past ``CUDA_VISIBLE_DEVICES``).

Never flagged: users in ``ownership.exempt_users``; graphics processes (type ``G`` in
``nvidia-smi``: a desktop card's Xorg, Xwayland or gnome-shell, whoever runs them);
processes whose owner the host could not read (neither uid nor user: nobody to tell,
and a signal could not be verified). A process belongs to a job or claim when its
user name is the holder's (or, for a job, the user it runs as); only when the host
has no name for the process's uid is the uid compared instead. A process in a job's
container (``--image``: the container id its runtime wrote, as the host read it)
is that job's whatever its uid (a runtime that remaps uids); the id is the job's
user's to write, so at most it lets them vouch for processes on their own GPUs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from gputui.common.printable import owner_name

FlagKind = Literal["no-allocation", "outside-allocation"]
ProcKey = tuple[str, int, int | None]
"""(host, pid, start ticks): one process, never a later one that reuses its pid."""


@dataclass(frozen=True, slots=True)
class Holding:
    """One GPU given to a job or a claim (a live allocation)."""

    gpu_uuid: str
    host: str
    kind: str
    """``job`` or ``claim``."""
    id: int
    uid: int
    users: frozenset[str]
    """The user names its processes may run as: the owner (and a job's ``run_as``)."""
    containers: frozenset[str] = frozenset()
    """A job's container (12 hex): its processes are the job's whatever their uid."""


@dataclass(frozen=True, slots=True)
class GpuProc:
    """One process on one GPU, as its host's latest sample lists it."""

    host: str
    gpu_uuid: str
    gpu_index: int
    pid: int
    uid: int | None
    user: str | None
    name: str
    start_ticks: int | None
    graphics: bool = False
    container: str | None = None
    """The container it runs in (12 hex), as its host read it."""

    @property
    def key(self) -> ProcKey:
        return (self.host, self.pid, self.start_ticks)

    @property
    def owner(self) -> str:
        """The user name, or ``uid N`` when the host has none for it."""
        return owner_name(self.user, self.uid)


@dataclass(frozen=True, slots=True)
class Offence:
    proc: GpuProc
    kind: FlagKind


def belongs(proc: GpuProc, holding: Holding) -> bool:
    """Whether ``proc`` is its holder's: in the holder's container, else by user name,
    by uid only when there is no name."""
    if proc.container is not None and proc.container in holding.containers:
        return True
    if proc.user is not None:
        return proc.user in holding.users
    return proc.uid is not None and proc.uid == holding.uid


def exempt(proc: GpuProc, exempt_users: Collection[str]) -> bool:
    """Processes never flagged (see the module's docstring)."""
    if proc.graphics or (proc.uid is None and proc.user is None):
        return True
    return proc.user is not None and proc.user in exempt_users


def offences(
    holdings: Iterable[Holding], procs: Iterable[GpuProc], exempt_users: Collection[str]
) -> list[Offence]:
    """The processes (one entry per process and GPU) that should not be where they are."""
    on_gpu: dict[str, list[Holding]] = {}
    on_host: dict[str, list[Holding]] = {}
    for h in holdings:
        on_gpu.setdefault(h.gpu_uuid, []).append(h)
        on_host.setdefault(h.host, []).append(h)
    found: list[Offence] = []
    for proc in procs:
        if exempt(proc, exempt_users):
            continue
        if any(belongs(proc, h) for h in on_gpu.get(proc.gpu_uuid, ())):
            continue
        here = any(belongs(proc, h) for h in on_host.get(proc.host, ()))
        found.append(Offence(proc, "outside-allocation" if here else "no-allocation"))
    return found


# -- what happens to a flagged process over time ---------------------------------------


@dataclass(frozen=True, slots=True)
class Watched:
    """What is known of one flagged process between ticks (kept in memory only)."""

    since: float
    """When it was first seen flagged."""
    first_mark: int
    """Its host's sample count then: it is *confirmed* once a later sample shows it too."""
    confirmed: bool = False
    told: bool = False
    term_at: float | None = None
    """When SIGTERM was sent (``enforce``)."""
    kill_at: float | None = None
    """When SIGKILL was sent: it got a further grace after SIGTERM and was still there."""


@dataclass(frozen=True, slots=True)
class Flag:
    """A flagged process on one GPU, as consoles and ``gputui queue`` show it."""

    proc: GpuProc
    kind: FlagKind
    since: float
    signal_at: float | None
    """When the next signal is due (``enforce``); None under ``warn`` or once SIGKILL went."""
    next_signal: str | None
    """``TERM`` or ``KILL``: what ``signal_at`` sends."""
    signalled: str | None
    """The last signal sent: ``TERM``, ``KILL`` or None."""


@dataclass(frozen=True, slots=True)
class HostPart:
    """One host's part of a tick (``step_hosts``), kept for the next tick: what it was
    made from, and its flagged processes' memory and flags."""

    procs: tuple[GpuProc, ...]
    holdings: tuple[Holding, ...]
    """The holdings that could be its processes' (on the host, or on one of their GPUs)."""
    rules: tuple[object, ...]
    """(exempt users, enforce, grace)."""
    seen: dict[ProcKey, Watched]
    flags: tuple[Flag, ...]
    settled: bool
    """Every flagged process is confirmed and told (and, under ``enforce``, was sent
    SIGKILL): a tick over the same processes, holdings and rules changes nothing."""


@dataclass(slots=True)
class Step:
    """One tick's decisions: the new memory, what to show, whom to tell, what to signal."""

    seen: dict[ProcKey, Watched]
    flags: list[Flag] = field(default_factory=list)
    tell: list[Offence] = field(default_factory=list)
    """Newly confirmed processes (one entry each): their owners are told once."""
    signals: list[tuple[Offence, str]] = field(default_factory=list)
    """(offence, ``TERM`` | ``KILL``): at most one a process a tick."""
    parts: dict[str, HostPart] = field(default_factory=dict)
    """Each live host's part (``step_hosts``; ``step`` keeps none)."""


def step(
    seen: Mapping[ProcKey, Watched],
    found: Iterable[Offence],
    marks: Mapping[str, int],
    now: float,
    *,
    enforce: bool,
    grace_s: float,
) -> Step:
    """Move every flagged process on by one tick (the caller keeps ``Step.seen``).

    ``marks``: host -> how many samples the head has had from it; a host missing
    here sent nothing usable (down): what is known of its processes is kept as it
    is, so its grace does not start again when it comes back, but nothing is shown
    or done for it. A process gone from its host's sample is forgotten.

    A process is told about and signalled only once confirmed (two samples show it),
    so a sample taken just before a job's GPUs were given to it never counts. Under
    ``enforce`` it gets SIGTERM ``grace_s`` after it was first seen, and SIGKILL if
    it is still there ``grace_s`` after that; then nothing more (it stays flagged).
    """
    out = Step(seen={k: w for k, w in seen.items() if k[0] not in marks})
    firsts: dict[ProcKey, Offence] = {}
    for offence in found:
        key = offence.proc.key
        if offence.proc.host not in marks:
            continue
        firsts.setdefault(key, offence)
    for key, offence in firsts.items():
        mark = marks[key[0]]
        w = seen.get(key) or Watched(since=now, first_mark=mark)
        if not w.confirmed and mark != w.first_mark:
            w = replace(w, confirmed=True)
        if w.confirmed and not w.told:
            w = replace(w, told=True)
            out.tell.append(offence)
        if enforce and w.confirmed:
            if w.term_at is None and now - w.since >= grace_s:
                w = replace(w, term_at=now)
                out.signals.append((offence, "TERM"))
            elif w.term_at is not None and w.kill_at is None and now - w.term_at >= grace_s:
                w = replace(w, kill_at=now)
                out.signals.append((offence, "KILL"))
        out.seen[key] = w
    for offence in found:
        w_shown = out.seen.get(offence.proc.key)
        if w_shown is None or offence.proc.host not in marks:
            continue
        out.flags.append(_flag(offence, w_shown, enforce, grace_s))
    return out


def step_hosts(
    last: Step,
    procs: Mapping[str, tuple[GpuProc, ...]],
    holdings: Iterable[Holding],
    marks: Mapping[str, int],
    now: float,
    *,
    exempt_users: Collection[str],
    enforce: bool,
    grace_s: float,
) -> Step:
    """``step`` over ``offences``, host by host (``procs``: each host's processes).

    The same decisions as ``step(last.seen, offences(holdings, every process,
    exempt_users), marks, now, ...)``, in the same order; but a host whose part of
    ``last`` is settled (``HostPart.settled``) and was made from the same processes
    (the same ``GpuProc`` objects: ``HostWatch.gpu_processes`` keeps them), the same
    holdings and the same rules is that part again, not judged afresh: at a thousand
    hosts, most hosts' processes and holdings are as they were a second ago.
    """
    out = Step(seen={k: w for k, w in last.seen.items() if k[0] not in marks})
    on_gpu: dict[str, list[Holding]] = {}
    on_host: dict[str, list[Holding]] = {}
    for h in holdings:
        on_gpu.setdefault(h.gpu_uuid, []).append(h)
        on_host.setdefault(h.host, []).append(h)
    rules = (frozenset(exempt_users), enforce, grace_s)
    before: dict[str, dict[ProcKey, Watched]] | None = None
    for host, mine in procs.items():
        if host not in marks:
            continue
        held = list(on_host.get(host, ()))
        for uuid in dict.fromkeys(p.gpu_uuid for p in mine):
            held += [h for h in on_gpu.get(uuid, ()) if h.host != host]
        kept = last.parts.get(host)
        if (
            kept is not None
            and kept.settled
            and kept.procs == mine
            and kept.rules == rules
            and kept.holdings == tuple(held)
        ):
            part = kept
        else:
            if before is None:
                before = {}
                for key, w in last.seen.items():
                    before.setdefault(key[0], {})[key] = w
            found = offences(held, mine, exempt_users)
            made = step(
                before.get(host, {}), found, {host: marks[host]}, now,
                enforce=enforce, grace_s=grace_s,
            )  # fmt: skip
            settled = all(
                w.confirmed and w.told and (not enforce or w.kill_at is not None)
                for w in made.seen.values()
            )
            part = HostPart(mine, tuple(held), rules, made.seen, tuple(made.flags), settled)
            out.tell += made.tell
            out.signals += made.signals
        out.parts[host] = part
        out.seen.update(part.seen)
        out.flags += part.flags
    return out


def _flag(offence: Offence, w: Watched, enforce: bool, grace_s: float) -> Flag:
    signal_at: float | None = None
    next_signal: str | None = None
    signalled = "KILL" if w.kill_at is not None else "TERM" if w.term_at is not None else None
    if enforce and w.kill_at is None:
        if w.term_at is None:
            signal_at, next_signal = w.since + grace_s, "TERM"
        else:
            signal_at, next_signal = w.term_at + grace_s, "KILL"
    return Flag(offence.proc, offence.kind, w.since, signal_at, next_signal, signalled)


# -- idle jobs ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdleChange:
    """A running job's idle columns to write; ``tell``: its owner is told now."""

    idle_since: float | None
    tell: bool = False


def idle_step(
    gpu_uuids: Iterable[str],
    util: Mapping[str, int | None],
    *,
    idle_since: float | None,
    told: bool,
    now: float,
    idle_after_s: float,
) -> IdleChange | None:
    """What one running job's idle state becomes (None: nothing to write).

    Idle means every one of its GPUs reads 0% utilisation in its host's latest
    sample; one GPU above 0% ends it. A GPU with no reading (its host down, the
    field not available) says nothing either way: the state stays as it is. The
    owner is told once a run (``told``), when it has been idle ``idle_after_s``.
    """
    readings = [util.get(uuid) for uuid in gpu_uuids]
    if not readings:
        return None
    if any(r is not None and r > 0 for r in readings):
        return IdleChange(None) if idle_since is not None else None
    if any(r is None for r in readings):
        return None
    if idle_since is None:
        return IdleChange(now)
    if not told and now - idle_since >= idle_after_s:
        return IdleChange(idle_since, tell=True)
    return None
