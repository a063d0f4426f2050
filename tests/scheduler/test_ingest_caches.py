"""What the head's ingest path keeps between samples is never stale.

Each sample of each host used to be judged from scratch; now a few answers are kept
while what they were made from is unchanged (``bench/ingest.py`` measures why).
Each cache is driven here by hypothesis against the answer made afresh:

* ``HostWatch``: a host's hello is compared with the stored inventory only when the
  hello or that host's stored GPUs changed (a load, a batch's change, a card moved to
  or from another host, an undo), and what a hello lists is written only where the
  store holds something else;
* ``sorted_checks``: a card's unknown and not-applicable checks, kept per errors,
  context readings and card name;
* ``HeadHealth.refresh``: a flagged process's finding, kept per what it shows;
* ``FlagWatch``: flags compared each tick as tuples of what ``flag_view`` shows;
* ``HostWatch.gpu_processes``: a process listed as at the last tick is the same
  ``GpuProc``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.config.models import HealthThresholds
from gputui.health.applicable import verdict
from gputui.health.problems import NO_READING, sorted_checks
from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.watch.flags import _shown, flag_view
from gputui.scheduler.head.watch.health import HeadHealth
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.ownership import Flag, GpuProc
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Gpu
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello, ProcessSample, Sample

HOST = "gpu01"
MODELS = ("NVIDIA A100", "NVIDIA H100")


def _uuid(index: int) -> str:
    return f"GPU-{HOST}-{index:04d}"


def _hello(models: tuple[str, ...]) -> Hello:
    gpus = tuple(GpuInfo(index=i, uuid=_uuid(i), name=m) for i, m in enumerate(models))
    return Hello(protocol=1, helper_version="x", hostname=HOST, gpus=gpus)


def _snap(hello: Hello) -> HostSnapshot:
    sample = Sample(seq=1, gpus=tuple(GpuSample(index=g.index, uuid=g.uuid) for g in hello.gpus))
    return HostSnapshot(name=HOST, address=HOST, status=HostStatus.LIVE, hello=hello, sample=sample)


def _rows(models: tuple[str, ...], present: bool = True) -> list[Gpu]:
    return [
        Gpu(uuid=_uuid(i), host=HOST, index=i, model=m, present=present)
        for i, m in enumerate(models)
    ]


def _stale_inventory(watch: HostWatch, hello: Hello) -> bool:
    """Whether ``hello`` lists other GPUs than the watch holds for the host (afresh)."""
    gpus, _ = watch.inventory()
    known = {u: (g.index, g.model) for u, g in gpus.items() if g.host == HOST and g.present}
    return {g.uuid: (g.index, g.name) for g in hello.gpus} != known


_layouts = st.lists(st.sampled_from(MODELS), min_size=1, max_size=3).map(tuple)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), st.integers(0, 2)),
        st.tuples(st.just("load"), _layouts),
        st.tuples(st.just("remember"), _layouts, st.booleans()),
        st.tuples(st.just("as-hello"), st.integers(0, 2)),
        st.tuples(st.just("remember-hello"), st.integers(0, 2)),
        st.tuples(st.just("move"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("begin"), st.none()),
        st.tuples(st.just("undo"), st.none()),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=400, deadline=None)
@given(hellos=st.lists(_layouts, min_size=3, max_size=3), ops=_ops)
@example(  # a batch changes the host's rows under the same hello: looked at again
    hellos=[("NVIDIA A100",), ("NVIDIA H100",), ("NVIDIA H100",)],
    ops=[("observe", 0), ("observe", 0), ("remember", ("NVIDIA H100",), True), ("observe", 0)],
)
@example(  # a batch stores what a new hello lists, is observed, then is not committed
    hellos=[("NVIDIA A100",), ("NVIDIA H100",), ("NVIDIA H100",)],
    ops=[("observe", 0), ("begin", None), ("remember-hello", 1), ("observe", 1),
         ("undo", None), ("observe", 1)],
)  # fmt: skip
def test_inventory_is_compared_again_whenever_it_or_the_hello_changed(
    hellos: list[tuple[str, ...]], ops: list[tuple[Any, ...]]
) -> None:
    # Three hello objects, kept: observing one again is the same object again (as a
    # host's snapshots carry the hello of its session).
    made = [_hello(models) for models in hellos]
    snaps = [_snap(h) for h in made]
    watch = HostWatch({HOST: "default"}, lambda snap: None)
    watch.load(_rows(hellos[0]))
    for op, *args in ops:
        if op == "observe":
            snap = snaps[args[0]]
            kinds = [kind for kind, _ in watch.observe(snap)]
            assert ("inventory" in kinds) == _stale_inventory(watch, snap.hello), (op, args)
        elif op == "load":
            watch.load(_rows(args[0]))
        elif op == "remember":
            watch.remember(_rows(args[0], present=args[1]))
        elif op == "as-hello":  # the writer stores what a hello lists
            watch.load(_rows(hellos[args[0]]))
        elif op == "remember-hello":  # a batch stores what a hello lists (undone or not)
            watch.remember(_rows(hellos[args[0]]))
        elif op == "move":  # a card's row now names another host, or comes back
            where = "gpu02" if args[1] else HOST
            watch.remember([Gpu(uuid=_uuid(args[0]), host=where, index=args[0], model=MODELS[0])])
        elif op == "begin":
            watch.begin()
        else:
            watch.undo()


_errors = st.dictionaries(
    st.sampled_from(
        ["nvlinks", "fabric_state", "retired_pending", "remap_pending", "ecc_uncorrected",
         "throttle", "temp_c", "fan_pct", "persistence"]
    ),
    st.sampled_from(["NotSupported", "Unknown", "Timeout"]),
    max_size=4,
)  # fmt: skip
_readings = st.fixed_dictionaries(
    {
        "fabric_state": st.sampled_from([None, "completed", "not-supported", "in-progress"]),
        "remap_pending": st.sampled_from([None, True, False]),
        "retired_pending": st.sampled_from([None, True, False]),
    }
)


def _gpu(errors: dict[str, str], readings: dict[str, Any], health_read: bool) -> GpuSample:
    return GpuSample(index=0, uuid=_uuid(0), errors=errors, health_read=health_read, **readings)


_CHECKED = {
    "ecc_uncorrected": "ECC",
    "remap_pending": "row remapping",
    "retired_pending": "retired pages",
    "throttle": "throttling",
    "persistence": "persistence mode",
    "pcie_replays": "PCIe replays",
    "nvlinks": "NVLink",
    "fabric_state": "NVSwitch fabric",
    "temp_c": "temperature",
}


def _afresh(
    gpu: GpuSample, health: GpuSample | None, name: str | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """``sorted_checks`` as it was before its answers were kept: every verdict asked."""
    unknown: list[tuple[str, str]] = []
    not_applicable: list[str] = []
    if health is None and not gpu.health_read:
        unknown.append(NO_READING)
    for source in (gpu, health):
        if source is None:
            continue
        readings = {k: getattr(source, k) for k in ("fabric_state", "remap_pending",
                                                    "retired_pending")}  # fmt: skip
        for field, check in _CHECKED.items():
            why = source.errors.get(field)
            if why is None:
                continue
            kind, reason = verdict(field, why, name, source.errors, readings)
            if kind == "unknown":
                if (check, reason) not in unknown:
                    unknown.append((check, reason))
            elif check not in not_applicable:
                not_applicable.append(check)
    return unknown, [c for c in not_applicable if all(c != u for u, _ in unknown)]


@settings(max_examples=300, deadline=None)
@given(
    cards=st.lists(
        st.tuples(
            _errors,
            _readings,
            st.booleans(),
            st.none() | st.tuples(_errors, _readings),
            st.sampled_from([None, "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB",
                             "NVIDIA GeForce RTX 3090", "Mystery Card"]),
        ),
        min_size=1,
        max_size=6,
    )
)  # fmt: skip
def test_kept_checks_are_the_checks_made_afresh(cards: list[tuple[Any, ...]]) -> None:
    # Many cards in one run (and every run in one process): an answer kept for one
    # card's errors must never be given for another's different readings or model.
    for errors, readings, health_read, health_parts, name in cards:
        gpu = _gpu(errors, readings, health_read)
        health = None if health_parts is None else _gpu(*health_parts, True)
        info = None if name is None else GpuInfo(index=0, uuid=_uuid(0), name=name)
        assert sorted_checks(gpu, health, info) == _afresh(gpu, health, name)


_procs = st.builds(
    GpuProc,
    host=st.sampled_from([HOST, "gpu02"]),
    gpu_uuid=st.sampled_from([_uuid(0), _uuid(1)]),
    gpu_index=st.integers(0, 1),
    pid=st.integers(1, 3),
    uid=st.none() | st.integers(1000, 1001),
    user=st.none() | st.sampled_from(["alice", "bob"]),
    name=st.sampled_from(["python train.py", "python eval.py", "x" * 130, "x" * 131]),
    start_ticks=st.none() | st.integers(1, 2),
    graphics=st.booleans(),
)
_flags = st.builds(
    Flag,
    proc=_procs,
    kind=st.sampled_from(["no-allocation", "outside-allocation"]),
    since=st.sampled_from([1.0, 2.0]),
    signal_at=st.none() | st.sampled_from([3.0, 4.0]),
    next_signal=st.none() | st.sampled_from(["TERM", "KILL"]),
    signalled=st.none() | st.sampled_from(["TERM", "KILL"]),
)


@settings(max_examples=300, deadline=None)
@given(a=st.lists(_flags, max_size=3), b=st.lists(_flags, max_size=3))
def test_flags_compared_as_tuples_differ_as_their_views_do(a: list[Flag], b: list[Flag]) -> None:
    assert ([_shown(f) for f in a] == [_shown(f) for f in b]) == (
        [flag_view(f) for f in a] == [flag_view(f) for f in b]
    )


@settings(max_examples=60, deadline=None)
@given(ticks=st.lists(st.lists(_flags, max_size=4), min_size=1, max_size=5))
def test_a_kept_flag_finding_is_the_finding_made_afresh(
    tmp_path_factory: Any, ticks: list[list[Flag]]
) -> None:
    store = SqlStore.open(Path(tmp_path_factory.mktemp("db")) / "gputui.db")
    try:
        hosts = [HOST, "gpu02"]
        kept = HeadHealth(HealthThresholds(), hosts, clock=lambda: 0.0)
        watch = HostWatch(dict.fromkeys(hosts, "default"), lambda snap: None)
        for now, flags in enumerate(ticks, start=1):
            fresh = HeadHealth(HealthThresholds(), hosts, clock=lambda: 0.0)
            with store.transaction() as tx:
                kept.refresh(tx, float(now), watch, flags, 3600.0)
                fresh.refresh(tx, float(now), watch, flags, 3600.0)
            shown = [p.finding for p in kept.board.problems()]
            assert shown == [p.finding for p in fresh.board.problems()]
    finally:
        store.close()


def _lost(lost: bool) -> HostSnapshot:
    hello = _hello(("NVIDIA A100",))
    gpu = GpuSample(index=0, uuid=_uuid(0), state="lost" if lost else "ok")
    return HostSnapshot(
        name=HOST,
        address=HOST,
        status=HostStatus.LIVE,
        hello=hello,
        sample=Sample(seq=1, gpus=(gpu,)),
    )


def test_the_health_write_drops_an_acknowledgement_whose_problem_changed(
    tmp_path: Path,
) -> None:
    # Nothing else asks for the problem list here (no console, no ``health`` op): the
    # write itself must find that the acknowledged problem came again.
    store = SqlStore.open(tmp_path / "gputui.db")
    try:
        health = HeadHealth(HealthThresholds(), [HOST], clock=lambda: 0.0)

        def write(now: float) -> Any:
            with store.transaction() as tx:
                done = health.write(tx, now)
            health.committed(done)
            return done

        health.observe(_lost(True), 1.0)
        key = next(p.key for p in health.board.problems() if p.finding.code == "lost")
        assert health.board.acknowledge(key, "root", "known", 1.0)
        assert write(1.0).acks[key] is not None
        health.observe(_lost(False), 2.0)
        health.observe(_lost(True), 3.0)  # it came again: a second time, so changed
        assert write(3.0).acks == {key: None}
        with store.snapshot() as tx:
            assert all(a.key != key for a in tx.health.rows()[1])
    finally:
        store.close()


def _procs_afresh(watch: HostWatch) -> list[GpuProc]:
    """``gpu_processes`` made afresh: a ``GpuProc`` per process of every live host."""
    return [
        GpuProc(
            host=name,
            gpu_uuid=g.uuid,
            gpu_index=g.index,
            pid=p.pid,
            uid=p.uid,
            user=p.user,
            name=p.command,
            start_ticks=p.start_ticks,
            graphics=p.kind == "graphics",
            container=p.container,
        )
        for name, (_, sample) in watch.samples().items()
        for g in sample.gpus
        for p in g.processes
    ]


_PROCESS_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "pid": st.sampled_from([100, 101]),
    "uid": st.sampled_from([None, 1000, 1001]),
    "user": st.sampled_from([None, "alice", "bob"]),
    "command": st.sampled_from(["python a.py", "python b.py"]),
    "start_ticks": st.sampled_from([None, 5, 6]),
    "kind": st.sampled_from(["compute", "graphics"]),
    "container": st.sampled_from([None, "0123456789ab"]),
    "gpu_mem_mib": st.sampled_from([None, 100, 200]),  # not in GpuProc: never a difference
}
_edit = st.one_of(
    # One field of one process of one host's GPU: the sharpest change for a kept answer.
    *(
        st.tuples(st.sampled_from(["gpu01", "gpu02"]), st.integers(0, 1), st.just(k), values)
        for k, values in _PROCESS_FIELDS.items()
    ),
    st.tuples(st.sampled_from(["gpu01", "gpu02"]), st.integers(0, 1), st.just("gone"), st.none()),
    st.tuples(
        st.sampled_from(["gpu01", "gpu02"]),
        st.just(0),
        st.just("status"),
        st.sampled_from([HostStatus.LIVE, HostStatus.UNREACHABLE]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries(_PROCESS_FIELDS), st.lists(_edit, min_size=1, max_size=15))
def test_kept_gpu_processes_are_the_processes_made_afresh(
    first: dict[str, Any], edits: list[Any]
) -> None:
    """A process listed as at the last tick is the ``GpuProc`` made then; any field
    ``GpuProc`` takes that changed (its user, command, container ...) makes a new one.
    And the users on each GPU (kept until a host's change) are those of each host's
    last sample, whether it answers or not."""
    hosts = ("gpu01", "gpu02")
    last: dict[str, Sample] = {}
    watch = HostWatch(dict.fromkeys(hosts, "default"), lambda snap: None)
    procs: dict[tuple[str, int], dict[str, Any] | None] = {
        (h, i): dict(first) for h in hosts for i in range(2)
    }
    status = dict.fromkeys(hosts, HostStatus.LIVE)
    for host, index, field, value in edits:
        if field == "status":
            status[host] = value
        elif field == "gone":
            procs[host, index] = None
        else:
            procs[host, index] = {**(procs[host, index] or first), field: value}
        infos = tuple(GpuInfo(index=i, uuid=f"GPU-{host}-{i}") for i in range(2))
        hello = Hello(protocol=1, helper_version="x", hostname=host, gpus=infos)
        gpus = tuple(
            GpuSample(
                index=i,
                uuid=f"GPU-{host}-{i}",
                processes=() if (p := procs[host, i]) is None else (ProcessSample(**p),),
            )
            for i in range(2)
        )
        sample = Sample(seq=1, gpus=gpus)
        watch.observe(
            HostSnapshot(name=host, address=host, status=status[host], hello=hello, sample=sample)
        )
        last[host] = sample
        assert watch.gpu_processes() == _procs_afresh(watch)
        again = watch.gpu_processes_by_host()  # (nothing changed since: the same tuples)
        assert all(again[h] is procs for h, procs in watch.gpu_processes_by_host().items())
        users = {
            g.uuid: {p.uid for p in g.processes if p.uid is not None}
            for sample in last.values()
            for g in sample.gpus
        }
        assert watch.active_users() == users


_FENCE_READINGS: dict[str, st.SearchStrategy[Any]] = {
    "state": st.sampled_from(["ok", "ok", "lost", "error"]),
    "ecc_uncorrected": st.sampled_from([None, 0, 5]),
    "util_gpu": st.sampled_from([None, 0, 30]),
    "temp_c": st.sampled_from([40, 41]),  # read by no fencing rule
    "processes": st.sampled_from([(), (ProcessSample(pid=7, uid=1000, user="alice"),)]),
    "health_read": st.sampled_from([False, False, True]),
    "remap_pending": st.sampled_from([None, True, True]),  # fenced only on an idle card
    "remap_failed": st.sampled_from([None, False, True]),
    "fabric_state": st.sampled_from([None, "completed", "in-progress", "not-supported"]),
}
_fence_edit = st.one_of(
    *(
        st.tuples(st.just("gpu"), st.integers(0, 1), st.just(k), v)
        for k, v in _FENCE_READINGS.items()
    ),
    st.tuples(st.just("xid"), st.integers(0, 1), st.sampled_from([13, 48, 79]), st.none()),
    st.tuples(st.just("boot"), st.none(), st.sampled_from([None, 1.0e9, 1.1e9]), st.none()),
    st.tuples(
        st.just("row"),
        st.integers(0, 1),
        st.sampled_from([None, "lost", "xid-79", "ecc-uncorrected"]),
        st.sampled_from([None, "xid-79", "remap-pending"]),
    ),
    st.tuples(st.just("begin-undo"), st.none(), st.none(), st.none()),
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_fence_edit, min_size=1, max_size=20))
@example(  # a pending remap fences an idle card: the same health reading, then busy
    [("gpu", 0, "remap_pending", True), ("gpu", 0, "health_read", True),
     ("gpu", 0, "health_read", False), ("gpu", 0, "util_gpu", 30)]
)  # fmt: skip
def test_kept_fence_news_is_the_news_made_afresh(edits: list[Any]) -> None:
    """A host's fence news is kept while the hello, events, inventory and what the
    fencing rules read of each GPU are unchanged; whatever changes, it is the news the
    rules make afresh."""
    watch = HostWatch({HOST: "default"}, lambda snap: None)
    watch.load([Gpu(uuid=_uuid(i), host=HOST, index=i, model="NVIDIA A100") for i in range(2)])
    gpus: list[dict[str, Any]] = [{}, {}]
    events: tuple[Event, ...] = ()
    boot: float | None = None
    for what, index, a, b in edits:
        if what == "gpu":
            gpus[index][a] = b
        elif what == "xid":
            events = (*events, Event(kind="xid", xid=a, gpu_uuid=_uuid(index), time=1.2e9))
        elif what == "boot":
            boot = a
        elif what == "row":
            row = Gpu(uuid=_uuid(index), host=HOST, index=index, model="NVIDIA A100")
            row.fence_code, row.fenced_at, row.fence_waived = a, 1.05e9 if a else None, b
            watch.remember([row])
        else:
            watch.begin()
            watch.remember([Gpu(uuid=_uuid(0), host=HOST, index=0, present=False)])
            watch.undo()
        hello = _hello(("NVIDIA A100", "NVIDIA A100")).model_copy(update={"boot_time": boot})
        sample = Sample(
            seq=1, gpus=tuple(GpuSample(index=i, uuid=_uuid(i), **g) for i, g in enumerate(gpus))
        )
        snap = HostSnapshot(
            name=HOST,
            address=HOST,
            status=HostStatus.LIVE,
            hello=hello,
            sample=sample,
            events=events,
        )
        watch.observe(snap)
        readings = watch._hosts[HOST].readings
        assert watch._fence_news(snap, readings) == watch._fence_news_afresh(snap, readings)


_card_state = st.tuples(
    st.sampled_from([(), ((1000, "alice"),), ((1001, None), (1002, "bob"))]),  # processes
    st.sampled_from([None, 0, 2048]),  # memory in use
    st.sampled_from([None, 0, 90]),  # utilisation
    st.sampled_from(["ok", "ok", "lost"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_card_state, min_size=1, max_size=3), min_size=1, max_size=12))
def test_kept_kinds_of_a_hosts_card_problems_are_made_afresh(samples: list[Any]) -> None:
    """``HostWatch`` keeps what placement reads of a host's card problems (their kinds)
    with them: after every sample they are the kinds made afresh, and the host's slots
    are marked for a rebuild when those kinds changed."""
    watch = HostWatch({HOST: "default"}, lambda _: None)
    before: dict[str, frozenset[str]] = {}
    for seq, cards in enumerate(samples, 1):
        gpus = tuple(
            GpuSample(
                index=i,
                uuid=_uuid(i),
                state=state,
                util_gpu=util,
                mem_used_mib=mem,
                processes=tuple(
                    ProcessSample(pid=100 + n, uid=uid, user=user, command="python")
                    for n, (uid, user) in enumerate(procs)
                ),
            )
            for i, (procs, mem, util, state) in enumerate(cards)
        )
        hello = _hello(tuple(MODELS[0] for _ in gpus))
        snap = HostSnapshot(
            name=HOST,
            address=HOST,
            status=HostStatus.LIVE,
            hello=hello,
            sample=Sample(seq=seq, gpus=gpus),
        )
        watch.slots()  # built: a change marks them again
        watch.observe(snap)
        host = watch._hosts[HOST]
        afresh = {u: frozenset(p.kind for p in found) for u, found in host.problems.items()}
        assert host.kinds == afresh
        if afresh != before:
            assert HOST in watch._dirty_hosts
        before = afresh


def test_a_mig_cards_slices_have_their_own_problems() -> None:
    """The card walk looks at a card's slices only when it has any: a slice with a
    process nobody was given it for is rogue on its own, the card with it."""
    from gputui.scheduler.head.watch.cards import of_host
    from gputui.wire.mig import MigSample

    proc = ProcessSample(pid=4242, uid=1000, user="alice", command="python")
    card = GpuSample(
        index=0,
        uuid=_uuid(0),
        processes=(proc,),
        mig=(MigSample(index=0, uuid="MIG-a", pids=(4242,)), MigSample(index=1, uuid="MIG-b")),
    )
    plain = GpuSample(index=1, uuid=_uuid(1))
    found = of_host(Sample(seq=1, gpus=(card, plain)), [], ())
    assert {u: [p.kind for p in f] for u, f in found.items()} == {
        _uuid(0): ["rogue"],
        "MIG-a": ["rogue"],
    }


_inventories = st.lists(
    st.tuples(
        st.sampled_from(["gpu01", "gpu02"]),
        st.lists(st.tuples(st.integers(0, 3), st.sampled_from(MODELS)), max_size=3),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(inventories=_inventories)
def test_stored_inventory_is_what_the_hellos_said_and_the_watch_holds(
    tmp_path_factory: Any, inventories: list[tuple[str, list[tuple[int, str]], bool]]
) -> None:
    """Hellos stored one after the other (a card may move between the two hosts; a
    batch may not be committed): the rows are what each host's last stored hello said,
    the watch's copy is the rows, and a hello stored again as it is writes nothing."""
    from gputui.scheduler.head.watch.slices import cards_of

    store = SqlStore.open(Path(tmp_path_factory.mktemp("db")) / "gputui.db")
    watch = HostWatch({"gpu01": "default", "gpu02": "big"}, lambda snap: None)
    said: dict[str, dict[str, tuple[str, int, str]]] = {}
    for host, listed, commit in inventories:
        infos = {f"GPU-card-{n}": GpuInfo(index=i, uuid=f"GPU-card-{n}", name=m)
                 for i, (n, m) in enumerate(listed)}  # fmt: skip
        watch.begin()
        try:
            with store.transaction() as tx:
                watch.put_inventory(tx, host, cards_of(tuple(infos.values())))
                if not commit:
                    raise _NotCommitted
        except _NotCommitted:
            watch.undo()
            continue
        for other in said.values():  # a card listed here left the host it was on
            for uuid in infos:
                other.pop(uuid, None)
        said[host] = {u: (host, g.index, g.name) for u, g in infos.items()}
        with store.snapshot() as tx:
            stored = {g.uuid: GpuFacts.of(g) for g in tx.gpus()}
        present = {u: (f.host, f.index, f.model) for u, f in stored.items() if f.present}
        assert present == {u: f for listed in said.values() for u, f in listed.items()}
        held, _ = watch.inventory()
        assert held == stored  # every column, new rows (inserted in bulk) too
        # The same hello again: nothing looked up, nothing written.
        with store.transaction() as tx:
            spy = _Spy(tx)
            watch.put_inventory(spy, host, cards_of(tuple(infos.values())))  # type: ignore[arg-type]
        assert spy.calls == []


class _NotCommitted(Exception):
    """The batch fails: its transaction is rolled back."""


class _Spy:
    """A transaction that records which of its GPU methods were called."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name in ("gpu", "gpus", "gpus_by_uuid", "put_gpu", "add_gpus"):
            self.calls.append(name)
        return getattr(self._tx, name)


_slot_ops = st.lists(
    st.one_of(
        # a host's sample: live or not, each card's state
        st.tuples(
            st.just("observe"),
            st.sampled_from(["gpu01", "gpu02"]),
            st.booleans(),
            st.lists(st.sampled_from(["ok", "lost", "ok"]), min_size=1, max_size=3),
        ),
        # a card's row now says this (its host, drained, fenced, present)
        st.tuples(
            st.just("remember"),
            st.integers(0, 3),
            st.sampled_from(["gpu01", "gpu02"]),
            st.booleans(),
            st.booleans(),
            st.booleans(),
        ),
        st.tuples(st.just("drain-host"), st.sampled_from(["gpu01", "gpu02"]), st.booleans()),
        st.tuples(st.just("slots")),
        st.tuples(st.just("begin")),
        st.tuples(st.just("undo")),
        st.tuples(st.just("load")),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(ops=_slot_ops)
def test_slots_built_again_host_by_host_are_the_slots_built_afresh(
    ops: list[tuple[Any, ...]],
) -> None:
    """``HostWatch.slots`` builds again only the hosts that a sample or a batch changed
    since it was last asked: after any sequence of samples (a host coming and going,
    cards failing), rows remembered (a card drained, fenced, gone or moved to the other
    host), host drains, loads and undone batches, it is what building every host's
    slots afresh gives."""
    from gputui.scheduler.store.tables import Host

    hosts = {"gpu01": "default", "gpu02": "default"}
    watch = HostWatch(hosts, lambda snap: None)
    rows = {i: Gpu(uuid=f"GPU-card-{i}", host="gpu01" if i < 2 else "gpu02", index=i % 2)
            for i in range(4)}  # fmt: skip
    watch.load(rows.values())
    seq = 0
    for op, *args in ops:
        if op == "observe":
            name, live, states = args
            on = [r for r in rows.values() if r.host == name]
            hello = Hello(protocol=1, helper_version="x", hostname=name,
                          gpus=tuple(GpuInfo(index=r.index, uuid=r.uuid) for r in on))  # fmt: skip
            seq += 1
            sample = Sample(seq=seq, gpus=tuple(
                GpuSample(index=r.index, uuid=r.uuid, state=states[k % len(states)])  # type: ignore[arg-type]
                for k, r in enumerate(on)
            ))  # fmt: skip
            status = HostStatus.LIVE if live else HostStatus.UNREACHABLE
            watch.observe(HostSnapshot(name=name, address=name, status=status, hello=hello,
                                       sample=sample))  # fmt: skip
        elif op == "remember":
            i, where, drained, fenced, present = args
            rows[i] = Gpu(uuid=f"GPU-card-{i}", host=where, index=i % 2, present=present,
                          drained_at=1.0 if drained else None,
                          fence_code="xid-79" if fenced else None)  # fmt: skip
            watch.remember([rows[i]])
        elif op == "drain-host":
            watch.remember(host=Host(name=args[0], drained_at=1.0 if args[1] else None))
        elif op == "slots":
            watch.slots()
        elif op == "begin":
            watch.begin()
        elif op == "undo":
            watch.undo()
        else:
            watch.load(rows.values())
        kept = watch.slots()
        watch._dirty = True  # every host afresh
        assert kept == watch.slots(), (op, args)
