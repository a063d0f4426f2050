"""The pure ownership and idle rules (``gputui.scheduler.policy.ownership``), on generated clusters.

Hypothesis builds hosts with GPUs, jobs and claims holding some of them, and
processes of assorted users on assorted GPUs; the properties are the promises
the rules make, whatever the cluster looks like.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.scheduler.policy.ownership import (
    GpuProc,
    Holding,
    Offence,
    Step,
    Watched,
    belongs,
    idle_step,
    offences,
    step,
    step_hosts,
)

HOSTS = ("h1", "h2", "h3")
USERS = ("alice", "bob", "carol", "dave", "root", "svc")
UIDS = {name: 1000 + i for i, name in enumerate(USERS)}
BOXES = (None, None, "0123456789ab", "ba9876543210")
"""Container ids (12 hex) a job's run and a process may have; mostly none."""
# The strategies clusters() draws from, made once (hypothesis validates and labels
# each new strategy object: made per draw, that was most of a cluster's cost).
_OWNER = st.none() | st.sampled_from(USERS)
_KIND = st.sampled_from(("job", "claim"))
_USER = st.sampled_from(USERS)
_BOX = st.sampled_from(BOXES)
_NAME = st.sampled_from(("python", "Xorg", "train.py --x 1", ""))


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{host}-{index}"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Holding], list[GpuProc]]:
    """Live allocations (each GPU at most once) and processes on the same GPUs."""
    gpus = [(h, i) for h in HOSTS for i in range(draw(st.integers(1, 4)))]
    holdings: list[Holding] = []
    for n, (host, index) in enumerate(gpus):
        owner = draw(_OWNER)
        if owner is None:
            continue
        kind = draw(_KIND)
        users = {owner}
        if kind == "job" and draw(st.booleans()):
            users.add(draw(_USER))  # the job runs as another user
        box = draw(_BOX) if kind == "job" else None
        holdings.append(
            Holding(
                gpu_uuid(host, index), host, kind, n + 1, UIDS[owner], frozenset(users),
                frozenset({box}) if box else frozenset(),
            )
        )  # fmt: skip
    procs: list[GpuProc] = []
    for pid in range(2, 2 + draw(st.integers(0, 24))):
        host, index = draw(st.sampled_from(gpus))
        user = draw(_USER)
        procs.append(
            GpuProc(
                host=host,
                gpu_uuid=gpu_uuid(host, index),
                gpu_index=index,
                pid=pid,
                uid=UIDS[user],
                user=user if draw(st.integers(0, 9)) else None,  # mostly with a name
                name=draw(_NAME),
                start_ticks=draw(st.integers(0, 10**6)),
                graphics=draw(st.integers(0, 5)) == 0,
                container=draw(_BOX),
            )
        )
    return holdings, procs


exempts = st.lists(st.sampled_from(USERS), max_size=2, unique=True)


@settings(max_examples=300)
@given(clusters(), exempts)
def test_a_process_of_its_gpus_holder_is_never_flagged(
    cluster: tuple[list[Holding], list[GpuProc]], exempt: list[str]
) -> None:
    holdings, procs = cluster
    flagged = {(o.proc.pid, o.proc.gpu_uuid) for o in offences(holdings, procs, exempt)}
    for proc in procs:
        if any(h.gpu_uuid == proc.gpu_uuid and belongs(proc, h) for h in holdings):
            assert (proc.pid, proc.gpu_uuid) not in flagged, proc


@settings(max_examples=300)
@given(clusters(), exempts)
def test_a_process_of_someone_with_nothing_on_its_host_is_always_flagged_no_allocation(
    cluster: tuple[list[Holding], list[GpuProc]], exempt: list[str]
) -> None:
    holdings, procs = cluster
    kinds = {(o.proc.pid, o.proc.gpu_uuid): o.kind for o in offences(holdings, procs, exempt)}
    for proc in procs:
        if proc.graphics or (proc.user is not None and proc.user in exempt):
            continue
        if not any(h.host == proc.host and belongs(proc, h) for h in holdings):
            assert kinds.get((proc.pid, proc.gpu_uuid)) == "no-allocation", proc


@settings(max_examples=300)
@given(clusters(), exempts)
def test_exempt_users_and_graphics_processes_are_never_flagged(
    cluster: tuple[list[Holding], list[GpuProc]], exempt: list[str]
) -> None:
    holdings, procs = cluster
    for o in offences(holdings, procs, exempt):
        assert not o.proc.graphics
        assert o.proc.user is None or o.proc.user not in exempt


@settings(max_examples=300)
@given(clusters(), exempts)
def test_the_kind_says_whether_the_owner_holds_anything_else_on_the_host(
    cluster: tuple[list[Holding], list[GpuProc]], exempt: list[str]
) -> None:
    holdings, procs = cluster
    for o in offences(holdings, procs, exempt):
        proc = o.proc
        mine_here = [h for h in holdings if h.host == proc.host and belongs(proc, h)]
        assert not any(h.gpu_uuid == proc.gpu_uuid for h in mine_here)
        assert o.kind == ("outside-allocation" if mine_here else "no-allocation"), (o, mine_here)


def test_a_name_decides_before_a_uid_and_a_uid_only_without_a_name() -> None:
    job = Holding("GPU-a", "h1", "job", 1, 1000, frozenset({"alice", "svc"}))
    base = GpuProc("h1", "GPU-a", 0, 9, 1000, "alice", "python", 5)
    assert belongs(base, job)
    assert belongs(replace(base, user="svc", uid=4242), job)  # runs as the job's run_as user
    # The same uid number under another name (another host's passwd) is not alice.
    assert not belongs(replace(base, user="mallory"), job)
    assert belongs(replace(base, user=None), job)
    assert not belongs(replace(base, user=None, uid=1001), job)
    # Nobody to tell and nothing to verify a signal with: never flagged.
    unknown = replace(base, gpu_uuid="GPU-b", user=None, uid=None)
    assert offences([job], [unknown], ()) == []


def test_a_process_in_its_jobs_container_is_the_jobs_whatever_its_uid() -> None:
    """A runtime that remaps uids shows the container's processes under other uids:
    the container id (from the runtime's --cidfile) still ties them to the job, on
    the job's own GPUs only."""
    job = Holding("GPU-a", "h1", "job", 1, 1000, frozenset({"alice"}), frozenset({"c0ffee123456"}))
    remapped = GpuProc("h1", "GPU-a", 0, 9, 101000, None, "python", 5, container="c0ffee123456")
    assert belongs(remapped, job) and offences([job], [remapped], ()) == []
    elsewhere = replace(remapped, container="deadbeef0000")
    assert [o.kind for o in offences([job], [elsewhere], ())] == ["no-allocation"]
    other_gpu = replace(remapped, gpu_uuid="GPU-b", gpu_index=1)
    assert [o.kind for o in offences([job], [other_gpu], ())] == ["outside-allocation"]
    claim = replace(job, kind="claim", containers=frozenset())
    assert not belongs(remapped, claim)


# -- over time ------------------------------------------------------------------------


_HISTORY = st.lists(
    st.tuples(st.floats(0.1, 40.0), st.booleans(), st.integers(0, 9).map(bool)),
    min_size=1,
    max_size=40,
)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[float, bool, bool]]:
    """Ticks: (seconds since the last, a new sample came, the process is still flagged)."""
    return draw(_HISTORY)


PROC = GpuProc("h1", "GPU-a", 0, 4242, 1001, "bob", "python", 77)


@settings(max_examples=400)
@given(histories(), st.floats(0.0, 60.0), st.sampled_from((True, False)))
def test_a_process_is_told_once_and_signalled_term_then_kill_each_at_most_once(
    history: list[tuple[float, bool, bool]], grace: float, enforce: bool
) -> None:
    seen: dict[tuple[str, int, int | None], Watched] = {}
    now, mark = 1000.0, 1
    told = 0
    sent: list[tuple[str, float]] = []
    first_seen: float | None = None
    offence = Offence(PROC, "no-allocation")
    for gap, new_sample, present in history:
        now += gap
        mark += new_sample
        found = [offence] if present else []
        out = step(seen, found, {"h1": mark}, now, enforce=enforce, grace_s=grace)
        seen = out.seen
        if not present:
            assert PROC.key not in seen  # gone from its host: forgotten
            first_seen = None
            told, sent = 0, []  # a new process as far as the rules go
            continue
        if first_seen is None:
            first_seen = now
        told += len(out.tell)
        for o, signal in out.signals:
            assert o == offence
            sent.append((signal, now))
        assert told <= 1
        assert [s for s, _ in sent] in ([], ["TERM"], ["TERM", "KILL"])
        if not enforce:
            assert not sent
        if sent:
            assert sent[0][1] - first_seen >= grace
            assert told == 1, "told before (or when) it is signalled"
        if len(sent) == 2:
            assert sent[1][1] - sent[0][1] >= grace
        (flag,) = out.flags
        assert flag.since == first_seen
        assert (flag.signal_at is not None) == (enforce and len(sent) < 2)


def test_a_process_is_confirmed_by_a_second_sample_before_anything_is_done() -> None:
    offence = Offence(PROC, "no-allocation")
    first = step({}, [offence], {"h1": 5}, 100.0, enforce=True, grace_s=0.0)
    assert first.flags and not first.tell and not first.signals
    same_sample = step(first.seen, [offence], {"h1": 5}, 101.0, enforce=True, grace_s=0.0)
    assert not same_sample.tell and not same_sample.signals
    second = step(same_sample.seen, [offence], {"h1": 6}, 102.0, enforce=True, grace_s=0.0)
    assert second.tell == [offence] and second.signals == [(offence, "TERM")]


def test_a_host_that_sent_nothing_keeps_its_processes_grace_but_shows_nothing() -> None:
    offence = Offence(PROC, "no-allocation")
    one = step({}, [offence], {"h1": 1}, 100.0, enforce=True, grace_s=30.0)
    down = step(one.seen, [], {}, 110.0, enforce=True, grace_s=30.0)
    assert down.flags == [] and PROC.key in down.seen
    back = step(down.seen, [offence], {"h1": 2}, 131.0, enforce=True, grace_s=30.0)
    assert back.flags[0].since == 100.0 and back.signals == [(offence, "TERM")]


def test_a_process_on_two_gpus_is_told_and_signalled_once_and_shown_on_both() -> None:
    other = replace(PROC, gpu_uuid="GPU-b", gpu_index=1)
    found = [Offence(PROC, "no-allocation"), Offence(other, "no-allocation")]
    one = step({}, found, {"h1": 1}, 0.0, enforce=True, grace_s=0.0)
    two = step(one.seen, found, {"h1": 2}, 1.0, enforce=True, grace_s=0.0)
    assert len(two.flags) == 2 and len(two.tell) == 1 and len(two.signals) == 1


# -- idle jobs ------------------------------------------------------------------------


@settings(max_examples=400)
@given(
    st.lists(
        st.tuples(
            st.floats(0.1, 900.0),
            st.lists(st.none() | st.just(0) | st.integers(0, 100), min_size=2, max_size=2),
        ),
        min_size=1,
        max_size=40,
    ),
    st.floats(1.0, 3600.0),
)
def test_an_idle_job_is_told_once_only_after_the_idle_time_and_busy_ends_it(
    samples: list[tuple[float, list[int | None]]], after: float
) -> None:
    gpus = ("GPU-a", "GPU-b")
    idle_since: float | None = None
    told = False
    tells = 0
    now = 0.0
    for gap, readings in samples:
        now += gap
        util = dict(zip(gpus, readings, strict=True))
        change = idle_step(
            gpus, util, idle_since=idle_since, told=told, now=now, idle_after_s=after
        )
        if change is not None:
            if change.tell:
                assert idle_since is not None and now - idle_since >= after
                tells += 1
                told = True
            idle_since = change.idle_since
        if any(r is not None and r > 0 for r in readings):
            assert idle_since is None
        elif all(r == 0 for r in readings):
            assert idle_since is not None
    assert tells <= 1


def test_unknown_readings_leave_the_idle_state_as_it_is() -> None:
    gpus = ("GPU-a", "GPU-b")
    assert idle_step(gpus, {"GPU-a": 0}, idle_since=None, told=False, now=5, idle_after_s=1) is None
    kept = idle_step(gpus, {"GPU-a": 0}, idle_since=1.0, told=False, now=500, idle_after_s=1)
    assert kept is None
    busy = idle_step(gpus, {"GPU-a": 3}, idle_since=1.0, told=True, now=500, idle_after_s=1)
    assert busy is not None and busy.idle_since is None and not busy.tell


PROC_H1 = GpuProc("h1", gpu_uuid("h1", 0), 0, 4242, UIDS["bob"], "bob", "python", 77)
HOLD_H1 = Holding(gpu_uuid("h1", 0), "h1", "claim", 1, UIDS["bob"], frozenset({"bob"}))

_TICK = st.tuples(
    st.integers(0, 2),  # which of the drawn clusters' processes the hosts list now
    st.integers(0, 2),  # which of the drawn clusters' holdings the store has now
    st.sets(st.sampled_from(HOSTS)),  # hosts whose processes are made again (equal, new)
    st.sets(st.sampled_from(HOSTS), min_size=1),  # hosts with a sample (the rest: down)
    st.sets(st.sampled_from(HOSTS)),  # hosts with a new sample since the last tick
    st.sampled_from((0.0, 1.0, 30.0)),  # time passing
    st.booleans(),  # enforce
    st.sampled_from((0.0, 30.0)),  # grace
    st.sampled_from(((), ("root",), ("alice", "svc"))),  # exempt users
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(clusters(), min_size=3, max_size=3),
    st.lists(_TICK, min_size=1, max_size=12),
    st.sampled_from([None, ("h1", "h2"), ("h2", "h1")]),
)
@example(  # settled (confirmed, told), then its owner claims its GPU: no longer flagged
    [([], [PROC_H1]), ([HOLD_H1], []), ([], [])],
    [(0, 0, set(), {"h1"}, {"h1"}, 1.0, False, 0.0, ())] * 3
    + [(0, 1, set(), {"h1"}, {"h1"}, 1.0, False, 0.0, ())],
    None,
)
def test_a_tick_host_by_host_decides_as_one_over_the_whole_cluster(
    drawn: list[tuple[list[Holding], list[GpuProc]]],
    ticks: list[tuple[int, int, set[str], set[str], set[str], float, bool, float, tuple[str, ...]]],
    stray: tuple[str, str] | None,
) -> None:
    """``step_hosts`` (a settled host whose processes, holdings and rules are as they
    were is kept, not judged afresh) decides what ``step`` over ``offences`` of the
    whole cluster decides, tick after tick: the same memory, flags, owners told and
    signals, in the same order; whatever comes and goes, and a holding that names a
    GPU of another host than its own (a host that sends another's uuid)."""
    now = 1000.0
    marks = dict.fromkeys(HOSTS, 1)
    afresh = Step(seen={})
    kept = Step(seen={})
    for pick, held, remade, live, sampled, gap, enforce, grace, exempt in ticks:
        holdings, procs = drawn[held][0], drawn[pick][1]
        if stray is not None:
            holder, other = stray
            holdings = [*holdings, Holding(gpu_uuid(holder, 0), other, "claim", 99, 1000,
                                           frozenset({"alice"}))]  # fmt: skip
        now += gap
        for host in sampled:
            marks[host] += 1
        by_host: dict[str, tuple[GpuProc, ...]] = {h: () for h in HOSTS if h in live}
        for p in procs:
            if p.host in live:
                by_host[p.host] += (replace(p) if p.host in remade else p,)
        live_marks = {h: m for h, m in marks.items() if h in live}
        everyone = [p for mine in by_host.values() for p in mine]
        afresh = step(
            afresh.seen, offences(holdings, everyone, exempt), live_marks, now,
            enforce=enforce, grace_s=grace,
        )  # fmt: skip
        kept = step_hosts(
            kept, by_host, holdings, live_marks, now,
            exempt_users=exempt, enforce=enforce, grace_s=grace,
        )  # fmt: skip
        assert kept.seen == afresh.seen
        assert kept.flags == afresh.flags
        assert kept.tell == afresh.tell
        assert kept.signals == afresh.signals
