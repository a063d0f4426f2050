"""The helper's ``clocks`` request (``power.mode: lock``) on the real ``pynvml``
module with its functions stubbed (``nvmlkit``): a lock pins the lowest supported
graphics clock, a reset undoes it, a card that cannot be locked is asked of NVML
once and then answered from memory (one failing card while the others work), and
the helper resets what it locked when it exits. The simulator's draw: a held idle
card draws more than an empty one, and less again once locked.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable
from typing import Any

import pynvml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvmlkit import ERRORS, FakeNvml, three_gpus

from gputui.remote.dispatch import SLOW, _answer
from gputui.remote.helper import Helper, run
from gputui.remote.sim.device import SimDevice
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.env import SimProc
from gputui.remote.sim.spec import MODELS, parse_spec
from gputui.remote.wire import Output
from gputui.wire.ops import ClocksRequest, ClocksResult, ResultError

SET = "nvmlDeviceSetGpuLockedClocks"
RESET = "nvmlDeviceResetGpuLockedClocks"


def _helper() -> Helper:
    helper = Helper(pynvml, Output(io.BytesIO()), "host", simulated=False)
    helper.hello()
    return helper


def _clocks(helper: Helper, index: int, action: str, uuid: str | None = None) -> dict[str, Any]:
    """The request as the head sends it (``ClocksRequest``), answered by the helper."""
    gpu_uuid = uuid or helper.gpus[index].uuid
    request = ClocksRequest(index=index, uuid=gpu_uuid, action=action)  # type: ignore[arg-type]
    line = json.loads(request.line(7))
    return _answer(helper, 7, SLOW["clocks"], line)


def _ok(answer: dict[str, Any]) -> ClocksResult:
    assert answer["ok"], answer
    return ClocksRequest.model_validate(
        {"index": 0, "uuid": answer["value"]["uuid"], "action": "lock"}
    ).decode(answer["value"])


def test_a_lock_pins_the_lowest_graphics_clock_and_a_reset_frees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNvml(three_gpus()).install(monkeypatch)
    helper = _helper()
    locked = _ok(_clocks(helper, 0, "lock"))
    assert (locked.locked, locked.supported, locked.mhz, locked.error) == (True, True, 345, None)
    assert fake.gpus[0].locked == (345, 345)  # the H100's lowest, as min and max
    assert helper.clocks.locked == {fake.gpus[0].uuid: 345}
    freed = _ok(_clocks(helper, 0, "reset"))
    assert (freed.locked, freed.supported) == (False, True)
    assert fake.gpus[0].locked is None and helper.clocks.locked == {}
    assert fake.calls[(SET, 0)] == 1 and fake.calls[(RESET, 0)] == 1
    assert fake.gpus[1].locked is None and fake.gpus[2].locked is None  # only that card


def test_a_request_for_another_card_or_a_bad_action_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNvml(three_gpus()).install(monkeypatch)
    helper = _helper()
    wrong = _clocks(helper, 0, "lock", uuid=fake.gpus[1].uuid)
    assert (wrong["ok"], wrong["code"]) == (False, "wrong-gpu")
    line = {"id": 1, "op": "clocks", "index": 0, "uuid": fake.gpus[0].uuid, "action": "boost"}
    bad = _answer(helper, 1, SLOW["clocks"], line)
    assert (bad["ok"], bad["code"]) == (False, "bad-request") and "lock or reset" in bad["error"]
    assert fake.calls[(SET, 0)] == 0 and fake.calls[(SET, 1)] == 0


FAILS = st.one_of(
    st.tuples(st.sampled_from(["NotSupported", "NoPermission"]), st.sampled_from([SET])),
    st.tuples(
        st.sampled_from(["NotSupported", "NoPermission"]),
        st.sampled_from(["nvmlDeviceGetSupportedMemoryClocks"]),
    ),
    st.tuples(st.just("arch"), st.sampled_from([2, 3, 4])),  # Kepler, Maxwell, Pascal
)


LOCK_PATH = (
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetSupportedMemoryClocks",
    "nvmlDeviceGetSupportedGraphicsClocks",
    SET,
)


def _lock_calls(fake: FakeNvml, index: int) -> int:
    return sum(fake.calls[(fn, index)] for fn in LOCK_PATH)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fail=FAILS, asks=st.integers(min_value=1, max_value=12))
def test_a_card_that_cannot_lock_is_asked_of_nvml_once_while_the_others_lock(
    monkeypatch: pytest.MonkeyPatch, fail: tuple[str, Any], asks: int
) -> None:
    gpus = three_gpus()
    kind, where = fail
    if kind == "arch":
        gpus[1].arch = where
    else:
        gpus[1].fail[where] = kind
    with monkeypatch.context() as mp:
        fake = FakeNvml(gpus).install(mp)
        helper = _helper()
        first = _ok(_clocks(helper, 1, "lock"))
        assert (first.locked, first.supported, first.remembered) == (False, False, False)
        assert first.error in ("NotSupported", "NoPermission")
        tried = _lock_calls(fake, 1)
        assert 1 <= tried <= len(LOCK_PATH) and fake.calls[(SET, 1)] <= 1
        if kind == "arch":  # known too old from its architecture: the lock is not tried
            assert fake.calls[(SET, 1)] == 0 and "older than Volta" in first.message
        again = [_ok(_clocks(helper, 1, "lock")) for _ in range(asks)]
        assert all((a.locked, a.supported, a.remembered) == (False, False, True) for a in again)
        assert _lock_calls(fake, 1) == tried  # answered from memory: NVML not asked again
        assert _ok(_clocks(helper, 0, "lock")).locked  # the cards beside it still lock
        assert _ok(_clocks(helper, 2, "lock")).locked
        freed = _ok(_clocks(helper, 1, "reset"))  # nothing to undo, nothing called
        assert fake.calls[(RESET, 1)] == 0 and not freed.supported


def test_a_passing_failure_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = three_gpus()
    gpus[0].fail[SET] = "Timeout"
    fake = FakeNvml(gpus).install(monkeypatch)
    helper = _helper()
    first = _ok(_clocks(helper, 0, "lock"))
    assert (first.locked, first.supported, first.error) == (False, True, "Timeout")
    del gpus[0].fail[SET]
    again = _ok(_clocks(helper, 0, "lock"))
    assert again.locked and fake.calls[(SET, 0)] == 2


def test_the_helper_resets_the_cards_it_locked_when_it_exits(
    monkeypatch: pytest.MonkeyPatch, wait_for: Callable[..., None]
) -> None:
    fake = FakeNvml(three_gpus()).install(monkeypatch)
    lines = [
        {"type": "request", "id": i + 1, "op": "clocks", "index": i, "uuid": g.uuid,
         "action": "lock"}
        for i, g in enumerate(fake.gpus[:2])
    ]  # fmt: skip
    read_end, write_end = os.pipe()
    out = io.BytesIO()
    codes: list[int] = []
    with os.fdopen(read_end, "rb") as stdin:
        runner = threading.Thread(target=lambda: codes.append(run([], stdin, out)))
        runner.start()
        os.write(write_end, b"".join(json.dumps(x).encode() + b"\n" for x in lines))
        wait_for(lambda: all(g.locked for g in fake.gpus[:2]))
        os.close(write_end)  # the client goes: the helper ends
        runner.join(30)
    assert codes == [0]
    results = [json.loads(x) for x in out.getvalue().splitlines()]
    assert sorted(r["id"] for r in results if r["type"] == "result" and r["ok"]) == [1, 2]
    assert fake.calls[(SET, 0)] == fake.calls[(SET, 1)] == 1
    assert fake.calls[(RESET, 0)] == fake.calls[(RESET, 1)] == 1  # at exit
    assert fake.calls[(RESET, 2)] == 0  # never locked: left alone
    assert all(g.locked is None for g in fake.gpus)


@pytest.mark.parametrize(("model", "held", "locked"), [("a40", 110.0, 42.0), ("v100", 59.0, 42.85)])
def test_the_simulator_draws_more_held_idle_and_less_again_once_locked(
    model: str, held: float, locked: float
) -> None:
    dev = SimDevice(0, model, "sim-host", seed=1)
    empty = MODELS[model].idle_w
    dev.advance(0.0)
    assert dev.power == pytest.approx(empty, rel=0.03)  # empty: a low power state by itself
    dev.procs = [SimProc(4242, ("0",), 8192, 0)]
    dev.last = None
    dev.advance(1.0)
    assert dev.power == pytest.approx(held, rel=0.03)  # held, idle: pinned high
    dev.locked_mhz = MODELS[model].sm_idle_mhz
    dev.last = None
    dev.advance(2.0)
    assert dev.power == pytest.approx(locked, rel=0.03)
    assert empty < dev.power < held


def test_errors_the_fake_raises_are_the_real_classes() -> None:
    err = pynvml.NVMLError(ERRORS["NoPermission"])
    assert type(err).__name__ == "NVMLError_NoPermission"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
FIELDS = ("index", "uuid", "locked", "supported", "error", "message", "mhz", "remembered")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), JSON) | JSON)
def test_any_clocks_answer_decodes_or_is_one_clean_refusal(value: Any) -> None:
    """What a helper answers is untrusted: a clean result, or ``ResultError``."""
    request = ClocksRequest(index=0, uuid="GPU-11111111-2222-3333-4444-555555555555", action="lock")
    try:
        result = request.decode(value if isinstance(value, dict) else {"value": value})
    except ResultError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("clocks result")
        return
    assert result.mhz is None or 1 <= result.mhz <= 100_000
    assert "\x1b" not in result.message and "\x1b" not in (result.error or "")


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_simulated_a40_held_idle_draws_110_w_and_less_once_locked(
    sim_process: Callable[..., Any], wait_for: Callable[..., None]
) -> None:
    """Through the helper on the simulator: a process holds memory on GPU 0 and does
    nothing; GPU 1 is empty. The helper's own samples show the draw."""
    clock = _Clock()
    lib = SimNvml(parse_spec("2xa40,name=lock-host"), clock=clock)
    lib.nvmlInit()
    helper = Helper(lib, Output(io.BytesIO()), "lock-host", simulated=True)
    helper.hello()
    kernel = sim_process(helper.gpus[0].uuid, mem_mib=8192, util=0)

    def settled() -> dict[int, dict[str, Any]]:
        """Samples a minute apart by the simulator's clock, until its draw has settled."""
        for _ in range(3):
            clock.t += 60
            sample = helper.sample()
        return {g["index"]: g for g in sample["gpus"]}

    wait_for(lambda: kernel.pid in (helper.gpus[0].pids() or ()))
    held = settled()
    assert held[0]["util_gpu"] == 0 and held[0]["util_mem"] == 0  # held, and idle
    assert held[0]["power_w"] == pytest.approx(110.0, rel=0.03)
    assert held[1]["power_w"] == pytest.approx(30.0, rel=0.03)  # empty: low by itself
    assert _ok(_clocks(helper, 0, "lock")).mhz == MODELS["a40"].sm_idle_mhz
    locked = settled()
    assert locked[0]["power_w"] == pytest.approx(42.0, rel=0.03)
    assert locked[0]["clock_sm_mhz"] == MODELS["a40"].sm_idle_mhz
    assert lib.devices[0].clock_locks == 1 and lib.devices[1].locked_mhz is None
    assert not _ok(_clocks(helper, 0, "reset")).locked
    assert settled()[0]["power_w"] == pytest.approx(110.0, rel=0.03)
