"""The head as Slurm's relay: consoles read Slurm through one poll of slurmctld.

A real head (in this process, on a real socket and SQLite file) with a ``slurm:``
section polls the real test Slurm; consoles' Slurm backends ask the head, never
Slurm, while it answers, and ask Slurm themselves when it does not.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slurmcluster import SlurmCluster

from gputui.config.models import Config, HeadConfig
from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.head.slurm_relay import private_jobs
from gputui.ui.head.slurm import HeadRelay, SlurmConsole, relayed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

pytestmark = pytest.mark.root


async def test_consoles_read_slurm_through_the_head_and_ask_slurm_only_without_it(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    job = int(
        slurm.cmd(
            "sbatch", "--parsable", "--gres=gpu:2", "-J", "relayed", "--wrap", "sleep 60"
        ).stdout
    )
    conf = SlurmConfig(refresh_s=2)
    async with running_head(tmp_path, {slurm.node: 4}, slurm=conf) as (head, _hosts, sock):
        relay_of_head = head.slurm
        assert relay_of_head is not None
        deadline = time.monotonic() + 30
        while relay_of_head.polls < 1:  # the head's first poll of Slurm
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)  # polling the head's state until a deadline
        config = Config(head=HeadConfig(socket=str(sock)), slurm=conf)
        relays = [HeadRelay(config) for _ in range(3)]
        consoles = [SlurmConsole.of(conf, dict, relay=r.ask) for r in relays]
        deadline = time.monotonic() + 30
        while True:
            states = [await c.subscribe() for c in consoles]
            jobs = [{j["id"]: j for j in s["state"]["jobs"]} for s in states]
            if all(job in j and j[job]["state"] == "RUNNING" for j in jobs):
                break
            assert time.monotonic() < deadline, [c.relay_problem for c in consoles]
            await asyncio.sleep(0.1)  # polling the head until a deadline
        assert all(c.calls == 0 and c.relay_problem is None for c in consoles)
        polls = head.slurm.polls
        assert polls >= 1
        for c in consoles:
            await c.subscribe()
        assert head.slurm.polls - polls <= 1  # three more reads cost Slurm at most one poll
        for r in relays:
            await r.close()
    # The head gone: a console asks Slurm itself, and says why.
    console = SlurmConsole.of(conf, dict, relay=HeadRelay(config).ask)
    state = await console.subscribe()
    assert console.calls == 1 and console.relay_problem
    assert any(j["id"] == job for j in state["state"]["jobs"])


async def test_a_head_without_slurm_refuses_the_slurm_request(tmp_path: Path) -> None:
    async with running_head(tmp_path, {"gpu01": 1}) as (_head, _hosts, sock):
        client = await AsyncHeadClient.open_local(sock)
        try:
            with pytest.raises(HeadError, match="no slurm: section"):
                await client.call("slurm", {})
        finally:
            await client.close()


def test_private_jobs_keep_the_relay_off() -> None:
    assert private_jobs("ClusterName = x\nPrivateData             = accounts,jobs\n")
    assert private_jobs("PrivateData = JOBS")
    assert not private_jobs("PrivateData             = none\n")
    assert not private_jobs("PrivateData = usage\nJobsFoo = jobs\n")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON)
def test_any_answer_from_the_head_is_a_snapshot_or_refused(answer: object) -> None:
    try:
        snap = relayed(answer)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError):
        return
    for job in snap.jobs:
        assert isinstance(job["id"], int) and isinstance(job["state"], str)


async def test_a_fence_drains_the_slurm_node_and_its_lift_resumes_it(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    conf = SlurmConfig(refresh_s=2)

    def node() -> tuple[str, str]:
        state, _, reason = (
            slurm.cmd("sinfo", "-h", "-N", "-o", "%T|%E").stdout.strip().partition("|")
        )
        return state, reason

    async def until_node(check: Callable[[tuple[str, str]], bool], what: str) -> tuple[str, str]:
        deadline = time.monotonic() + 30
        while not check(now := node()):
            assert time.monotonic() < deadline, f"{what}: {now}"
            await asyncio.sleep(0.1)  # polling Slurm until a deadline
        return now

    async with running_head(tmp_path, {slurm.node: 4}, slurm=conf, tick_s=0.1) as (head, hosts, _):
        deadline = time.monotonic() + 30
        while len(head.watch.present_gpus()) < 4:  # the head knows the node's GPUs
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)  # polling the head until a deadline
        hosts.put_fault(slurm.node, 2, ecc_uncorrected=3)  # the card goes bad: fenced
        _, reason = await until_node(lambda n: "drain" in n[0], "drained for the fence")
        assert reason.startswith("gputui fence: gpu2")
        hosts.put_fault(slurm.node, 2, ecc_uncorrected=0)  # the condition clears: lifted
        await until_node(lambda n: n[0] == "idle", "resumed once the fence lifted")
        slurm.cmd(
            "scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=admin: fan"
        )
        for _ in range(2):  # two of the relay's refreshes: the admin's drain stays
            polls = head.slurm.polls if head.slurm else 0
            deadline = time.monotonic() + 30
            while head.slurm and head.slurm.polls == polls:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)  # polling the head until a deadline
        assert node()[1] == "admin: fan"  # an admin's drain: never lifted by the head
