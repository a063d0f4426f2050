"""``power.mode: lock`` through the running head: a held card whose samples read 0 %
for ``idle_minutes`` gets its clocks locked low, and reset when it works again or its
claim ends; a card that cannot be locked is asked once and reported once. Every lock
and reset is an audit row.

The head's hosts are the scripted ones (``headkit``) except for the ``clocks``
request, which a real helper answers (``remote.gpuops``, in this process) on the real
``pynvml`` module with its functions stubbed (``tests/remote/nvmlkit``): the calls
NVML got are counted there. The head runs on a clock the test moves (samples 10 s
apart, on demand), so nothing sleeps.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll

from gputui.config.scheduler import Power, SchedulerConfig
from gputui.remote.dispatch import SLOW, _answer
from gputui.remote.helper import Helper
from gputui.remote.wire import Output
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.hostops import HostAnswer
from gputui.scheduler.head.watch.power import Ask, ClockLocks
from gputui.scheduler.policy.accounting import hour_of
from gputui.scheduler.policy.meter import Holder
from gputui.wire.ops import ClocksRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "remote"))
from nvmlkit import FakeNvml, three_gpus

T0 = float(hour_of(time.time()))
SET, RESET = "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"


@dataclass
class NvmlHosts(ScriptedHosts):
    """Scripted hosts whose ``clocks`` request a real helper answers on stubbed NVML."""

    helper: Helper | None = None
    asked: list[tuple[int, str]] = field(default_factory=list)
    """(GPU index, action) of every ``clocks`` request the head sent."""

    def uuid(self, host: str, index: int) -> str:
        assert self.helper is not None
        return self.helper.gpus[index].uuid

    async def clocks(self, host: str, index: int, uuid: str, action: str) -> HostAnswer:
        self.asked.append((index, action))
        request = ClocksRequest.model_validate({"index": index, "uuid": uuid, "action": action})
        line = json.loads(request.line(1))
        reply = await asyncio.to_thread(_answer, self.helper, 1, SLOW["clocks"], line)
        if not reply["ok"]:
            return HostAnswer(False, code=reply["code"], message=reply["error"])
        return HostAnswer(True, value=request.decode(reply["value"]).model_dump(mode="json"))


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Rig:
    """The head, its two-GPU host, the stubbed NVML behind the host's helper."""

    def __init__(self, th: ThreadedHead, fake: FakeNvml, clock: Clock) -> None:
        self.th, self.fake, self.clock = th, fake, clock
        assert th.hosts is not None and th.head is not None
        self.hosts, self.head = th.hosts, th.head
        self.uuids = [self.hosts.uuid("gpu01", i) for i in range(2)]

    def util(self, index: int, util: int) -> None:
        def put() -> None:
            self.hosts.util.setdefault("gpu01", {})[index] = util
            self.hosts.power.setdefault("gpu01", {})[index] = 110.0 if util == 0 else 250.0

        self.th.in_loop(put)

    def sample(self) -> None:
        """Ten seconds on, a sample; back once the meter counted it."""
        t = self.clock.t + 10

        def send() -> None:
            self.clock.t = t
            self.hosts.sample_again("gpu01")

        self.th.in_loop(send)
        poll(lambda: self.head.meter.meter._last.get(self.uuids[0]) == t, what="the sample")

    def samples_until(self, what: str, done: Any, most: int = 30) -> None:
        for _ in range(most):
            if done():
                return
            self.sample()
        poll(done, what=what)

    def held(self, index: int, yes: bool = True) -> None:
        def live() -> bool:
            holder = self.head.meter.holders.get(self.uuids[index])
            return holder is not None and holder.until is None

        poll(lambda: live() == yes, what=f"GPU {index} held={yes}")

    def audit(self) -> list[tuple[str, str, str, str]]:
        return [
            (str(a), str(t), str(r), str(o))
            for a, t, r, o in self.th.rows(
                "SELECT action, target, reason, outcome FROM audit"
                " WHERE action LIKE 'clocks-%' ORDER BY id"
            )
        ]


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    gpus = three_gpus()[:2]
    gpus[1].fail[SET] = "NoPermission"  # the helper is not root for this one, say
    fake = FakeNvml(gpus).install(monkeypatch)
    helper = Helper(pynvml, Output(io.BytesIO()), "gpu01", simulated=False)
    helper.hello()
    clock = Clock(T0)
    sched = SchedulerConfig(power=Power(mode="lock", idle_minutes=1))
    with ThreadedHead(
        tmp_path,
        {"gpu01": 2},
        clock=clock,
        scripted=NvmlHosts({"gpu01": 2}, helper=helper),
        rules=Rules(claim_idle_s=86400.0, sched=sched),
    ) as th:
        yield Rig(th, fake, clock)
        assert not [p for p in th.problems if "cannot lock" not in p], th.problems


def test_a_held_idle_card_is_locked_and_reset_as_it_wakes_and_as_its_claim_ends(
    rig: Rig,
) -> None:
    fake, head = rig.fake, rig.head
    gpu0, gpu1 = rig.uuids
    with LineClient(rig.th.sock) as c:
        claim = c.ok("claim", {"gpu_refs": ["gpu01:0"]})["claim"]
        c.ok("claim", {"gpu_refs": ["gpu01:1"]})
        rig.util(0, 0)
        rig.util(1, 0)
        rig.held(0)
        rig.held(1)
        for _ in range(5):  # idle 50 s: under the minute, nothing locked
            rig.sample()
        assert fake.calls[(SET, 0)] == 0 and head.clock_locks.locked == {}
        rig.samples_until("the lock", lambda: gpu0 in head.clock_locks.locked)
        assert fake.gpus[0].locked == (345, 345) and fake.calls[(SET, 0)] == 1
        assert [x["uuid"] for x in head.clock_locks.state()["clock_locks"]] == [gpu0]
        for _ in range(20):  # GPU 1 cannot: asked once, and never again
            rig.sample()
        assert fake.calls[(SET, 1)] == 1
        assert [a for i, a in rig.hosts.asked if i == 1] == ["lock"]  # the head asked once
        assert head.clock_locks.state()["clock_unsupported"] == {gpu1: "NoPermission"}

        rig.util(0, 60)  # it works again: reset at the next sample
        rig.samples_until("the reset", lambda: gpu0 not in head.clock_locks.locked, most=1)
        assert fake.gpus[0].locked is None and fake.calls[(RESET, 0)] == 1

        rig.util(0, 0)  # idle again for a minute: locked again
        rig.samples_until("the second lock", lambda: gpu0 in head.clock_locks.locked)
        assert fake.calls[(SET, 0)] == 2

        c.ok("release", {"claim_ids": [claim["id"]]})  # its holder goes: reset
        rig.held(0, False)
        rig.samples_until("the reset at release", lambda: not head.clock_locks.locked, most=2)
        assert fake.gpus[0].locked is None and fake.calls[(RESET, 0)] == 2
        assert fake.calls[(SET, 1)] == 1
    poll(lambda: len(rig.audit()) == 5, what="five audit rows")
    rows = rig.audit()
    me = claim["user"]
    assert [(a, r) for a, _t, r, _o in rows if "GPU 0" in _t] == [
        ("clocks-lock", f"held by a claim of {me}, 0% utilisation for 1 min or more"),
        ("clocks-reset", "utilisation rose"),
        ("clocks-lock", f"held by a claim of {me}, 0% utilisation for 1 min or more"),
        ("clocks-reset", f"a claim of {me} ended"),
    ]
    assert [o for _a, t, _r, o in rows if "GPU 0" in t] == [
        "locked at 345 MHz",
        "reset",
        "locked at 345 MHz",
        "reset",
    ]
    (unsupported,) = [r for r in rows if "GPU 1" in r[1]]
    assert unsupported[0] == "clocks-lock" and unsupported[3].startswith(
        "not supported: NoPermission"
    )
    assert gpu1 in unsupported[1]


def test_an_unsupported_answer_is_reported_once_whatever_comes_after() -> None:
    """Two answers that say so (a request already in flight when the first came)."""
    locks = ClockLocks(None, None, None, Power, clock=Clock(T0))  # type: ignore[arg-type]
    holder = Holder("u", "g", "", "p", T0)
    ask = Ask("gpu01", 1, "GPU-bbbbbbbb-0000-0000-0000-000000000000", "lock", holder, "idle")
    no = HostAnswer(True, value={"locked": False, "supported": False, "error": "NotSupported"})
    assert locks._take(ask, no) == "not supported: NotSupported"
    assert locks._take(ask, no) is None
    assert locks.unsupported == {ask.uuid: "NotSupported"} and locks.locked == {}
