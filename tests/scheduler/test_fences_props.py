"""The head's fences, store side, on generated GPUs and verdicts (a real SQLite file).

Whatever a GPU's drain, fence and waiver, and whatever the health rules say of it:
applying the plan settles it (planning again on the stored row finds nothing to
do), never touches the drain, lifts a fence that clears on reboot only after a
reboot, never fences a card again for a condition an admin waived while that
condition stays, and writes one audit row per fence or lift.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gputui.health.fencing import CONDITIONS, Fence, Verdict, rank
from gputui.scheduler.head import fences
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Gpu

NOW = 1_000_000.0
CODES = ("lost", "xid-79", "xid-48", "ecc-uncorrected", "remap-failed", "nvlink-down")
CLEARS = dict.fromkeys(CONDITIONS, "condition")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with tempfile.TemporaryDirectory() as tmp:
        mountinfo = Path(tmp) / "mountinfo"
        mountinfo.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
        made = open_store(Path(tmp) / "db" / "gputui.db", mountinfo=mountinfo)
        yield made
        made.dispose()


def _fence(code: str) -> Fence:
    return Fence(code, f"because {code}", "reboot" if code.startswith("xid") else "condition")


def verdict_of(present: Iterable[str], unjudged: Iterable[str] = ()) -> Verdict:
    fenced = sorted({_fence(c) for c in present}, key=lambda f: (rank(f.code), f.code))
    return Verdict(tuple(fenced), frozenset(unjudged))


times = st.floats(NOW - 1000, NOW - 1, allow_nan=False)
verdicts = st.builds(
    verdict_of,
    st.sets(st.sampled_from(CODES), max_size=3),
    st.sets(st.sampled_from(CONDITIONS), max_size=3),
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Gpu, Verdict, float | None, dict[int, float]]:
    drained = draw(st.booleans())
    code = draw(st.one_of(st.none(), st.sampled_from(CODES)))
    waived = draw(st.lists(st.sampled_from(CODES), max_size=3, unique=True))
    gpu = Gpu(
        uuid="GPU-x",
        host="h",
        index=0,
        drained_by="carol" if drained else None,
        drain_reason="fans" if drained else None,
        drained_at=draw(times) if drained else None,
        fence_code=code,
        fence_reason=None if code is None else f"because {code}",
        fenced_at=None if code is None else draw(times),
        fence_clears=None if code is None else CLEARS.get(code, "reboot"),
        fence_waived=",".join(waived) or None,
        fence_waived_at=draw(times) if waived else None,
    )
    verdict = draw(verdicts)
    boot = draw(st.one_of(st.none(), times))
    xids = draw(st.dictionaries(st.sampled_from((48, 79)), times, max_size=2))
    return gpu, verdict, boot, xids


@settings(max_examples=150, deadline=None)
@given(case=cases())
def test_the_plan_settles_and_keeps_its_promises(
    engine: Engine, case: tuple[Gpu, Verdict, float | None, dict[int, float]]
) -> None:
    gpu, verdict, boot, xids = case
    before = gpu.model_copy()
    store = SqlStore(engine)
    with store.transaction() as tx:
        for row in tx.gpus():
            tx.s.delete(row)
        tx.flush()
        tx.put_gpu(gpu.model_copy())
        tx.flush()
        audits_before = len(tx.audits(None, 100_000))
        changed = fences.apply(
            tx, "h", {gpu.uuid: verdict}, boot_time=boot, xid_times={"GPU-x": xids}, now=NOW
        )
        after = tx.gpu("GPU-x")
        assert after is not None
        # Settled: the same news again changes nothing.
        step = fences.plan(after, verdict, boot_time=boot, xid_times=xids)
        assert step is None, step
        # The drain is the admin's: a fence never sets or clears it.
        drain = (after.drained_by, after.drain_reason, after.drained_at)
        assert drain == (before.drained_by, before.drain_reason, before.drained_at)
        # A fence that clears on reboot lifts only when the host booted after it.
        if before.fence_clears == "reboot" and not (boot is not None and boot > before.fenced_at):
            assert after.fence_code == before.fence_code
        # A fence on a condition holds while its condition shows or cannot be judged.
        if before.fence_clears == "condition" and verdict.may_hold(before.fence_code or ""):
            assert after.fence_code is not None
        # A waiver covers its own condition only, while it stays (and, for an Xid,
        # did not come again): any other condition shown fences the card.
        waived = {
            c
            for c in (before.fence_waived or "").split(",")
            if c and not _again(c, xids, before.fence_waived_at or 0)
        }
        unwaived = [f for f in verdict.fences if f.code not in waived]
        if unwaived:
            assert after.fence_code is not None
        elif before.fence_code is None:
            assert after.fence_code is None
        if unwaived and before.fence_code is None:
            assert after.fenced_at == NOW and after.fence_code == unwaived[0].code
        # One audit row per fence or lift, and only then.
        tx.flush()
        rows = tx.audits(None, 100_000)[audits_before:]
        fenced_changed = (before.fence_code, before.fenced_at) != (
            after.fence_code,
            after.fenced_at,
        )
        assert len(rows) == (1 if fenced_changed else 0)
        if rows:
            assert rows[0].user == "gputui-head"
            assert rows[0].action == ("fence" if after.fence_code is not None else "unfence")
        assert bool(changed) == (_fields(before) != _fields(after))


def _again(code: str, xids: dict[int, float], since: float) -> bool:
    """An Xid fence's code whose Xid came again after ``since``."""
    return code.startswith("xid-") and xids.get(int(code[4:]), 0.0) > since


def _fields(gpu: Gpu) -> tuple[object, ...]:
    return (
        gpu.fence_code, gpu.fence_reason, gpu.fenced_at, gpu.fence_clears, gpu.fence_waived,
        gpu.fence_waived_at, gpu.drained_at,
    )  # fmt: skip


# -- sequences of readings and unfences, against a simple model ------------------------

CONDITION_CODES = ("lost", "xid-48", "xid-79", "ecc-uncorrected", "remap-failed", "fabric")
readings_step = st.tuples(
    st.just("readings"),
    st.sets(st.sampled_from(CONDITION_CODES), max_size=3),
    st.sets(st.sampled_from([c for c in CONDITION_CODES if not c.startswith("xid")]), max_size=2),
)
unfence_step = st.tuples(st.just("unfence"), st.just(frozenset()), st.just(frozenset()))


class Model:
    """What the head promises, told simply: a GPU is fenced while a condition shows
    that no admin waived; a fence holds while its condition shows or cannot be judged
    (an Xid's until a reboot: none here); an unfence waives the condition it named
    until a reading shows it gone, and nothing else."""

    def __init__(self) -> None:
        self.fenced: str | None = None
        self.waived: set[str] = set()

    def readings(self, present: set[str], unjudged: set[str]) -> None:
        self.waived = {c for c in self.waived if c in present or c in unjudged}
        open_ = sorted((c for c in present if c not in self.waived), key=lambda c: (rank(c), c))
        holds = self.fenced is not None and (
            self.fenced.startswith("xid-") or self.fenced in present or self.fenced in unjudged
        )
        if holds:
            assert self.fenced is not None
            worse = open_ and rank(open_[0]) < rank(self.fenced) and rank(self.fenced) > 1
            self.fenced = open_[0] if worse else self.fenced
        else:
            self.fenced = open_[0] if open_ else None

    def unfence(self) -> None:
        assert self.fenced is not None
        self.waived.add(self.fenced)
        self.fenced = None


@settings(max_examples=120, deadline=None)
@given(steps=st.lists(st.one_of(readings_step, unfence_step), min_size=1, max_size=12))
def test_sequences_of_conditions_and_unfences_keep_to_the_model(
    engine: Engine, steps: list[tuple[str, frozenset[str], frozenset[str]]]
) -> None:
    store = SqlStore(engine)
    model = Model()
    with store.transaction() as tx:
        for row in tx.gpus():
            tx.s.delete(row)
        tx.flush()
        tx.put_gpu(Gpu(uuid="GPU-x", host="h", index=0))
        tx.flush()
        audits = len(tx.audits(None, 100_000))
        for i, (kind, present, unjudged) in enumerate(steps):
            now = NOW + i
            before = tx.gpu("GPU-x")
            assert before is not None
            was = before.fence_code
            if kind == "unfence":
                if was is None:
                    continue
                fences.clear_fence(tx, before, "checked", now, uid=1000, user="carol")
                model.unfence()
            else:
                verdict = verdict_of(present, unjudged - present)
                fences.apply(tx, "h", {"GPU-x": verdict}, boot_time=None, xid_times={}, now=now)
                model.readings(set(present), set(unjudged - present))
            tx.flush()
            after = tx.gpu("GPU-x")
            assert after is not None
            assert after.fence_code == model.fenced, (steps[: i + 1], after.fence_code)
            assert set(fences.waivers(after)) == model.waived
            # Every change of fence has its one audit row, and nothing else has one.
            rows = tx.audits(None, 100_000)[audits:]
            audits += len(rows)
            assert len(rows) == (1 if after.fence_code != was else 0), rows
