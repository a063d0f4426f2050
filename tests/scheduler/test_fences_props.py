"""The head's fences, store side, on generated GPUs and verdicts (a real SQLite file).

Whatever a GPU's drain, fence and waiver, and whatever the health rules say of it:
applying the plan settles it (planning again on the stored row finds nothing to
do), never touches the drain, lifts a fence that clears on reboot only after a
reboot, never fences a card again for a condition an admin waived while that
condition stays, and writes one audit row per fence or lift.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gputui.health.fencing import Fence
from gputui.scheduler import fences
from gputui.scheduler.engine import open_store
from gputui.scheduler.store import JobStore
from gputui.scheduler.tables import Gpu

NOW = 1_000_000.0
CODES = ("lost", "xid-79", "xid-48", "ecc-uncorrected", "remap-failed")
CLEARS = {"lost": "condition", "ecc-uncorrected": "condition", "remap-failed": "condition"}


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


times = st.floats(NOW - 1000, NOW - 1, allow_nan=False)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Gpu, Fence | None, float | None, dict[int, float]]:
    drained = draw(st.booleans())
    code = draw(st.one_of(st.none(), st.sampled_from(CODES)))
    waived = draw(st.one_of(st.none(), st.sampled_from(CODES)))
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
        fence_waived=waived,
        fence_waived_at=None if waived is None else draw(times),
    )
    wanted = draw(st.one_of(st.none(), st.sampled_from(CODES).map(_fence)))
    boot = draw(st.one_of(st.none(), times))
    xids = draw(st.dictionaries(st.sampled_from((48, 79)), times, max_size=2))
    return gpu, wanted, boot, xids


@settings(max_examples=150, deadline=None)
@given(case=cases())
def test_the_plan_settles_and_keeps_its_promises(
    engine: Engine, case: tuple[Gpu, Fence | None, float | None, dict[int, float]]
) -> None:
    gpu, wanted, boot, xids = case
    before = gpu.model_copy()
    store = JobStore(engine)
    verdict = {} if wanted is None else {gpu.uuid: wanted}
    with store.transaction() as tx:
        for row in tx.gpus():
            tx.s.delete(row)
        tx.flush()
        tx.put_gpu(gpu.model_copy())
        tx.flush()
        audits_before = len(tx.audits(None, 100_000))
        changed = fences.apply(tx, "h", verdict, boot_time=boot, xid_times={"GPU-x": xids}, now=NOW)
        after = tx.gpu("GPU-x")
        assert after is not None
        # Settled: the same news again changes nothing.
        step = fences.plan(after, wanted, boot_time=boot, xid_times=xids)
        assert step is None, step
        # The drain is the admin's: a fence never sets or clears it.
        drain = (after.drained_by, after.drain_reason, after.drained_at)
        assert drain == (before.drained_by, before.drain_reason, before.drained_at)
        # A fence that clears on reboot lifts only when the host booted after it.
        if before.fence_clears == "reboot" and not (boot is not None and boot > before.fenced_at):
            assert after.fence_code == before.fence_code
        # A waived condition that stays (and, for an Xid, did not come again) fences nothing.
        if (
            before.fence_code is None
            and wanted is not None
            and before.fence_waived == wanted.code
            and not _again(wanted.code, xids, before.fence_waived_at or 0)
        ):
            assert after.fence_code is None
        if wanted is not None and before.fence_code is None and after.fence_code is not None:
            assert after.fenced_at == NOW and after.fence_code == wanted.code
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
