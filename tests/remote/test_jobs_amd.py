"""Jobs on AMD cards: the real helper (shipped by the bundle) on a simulated mixed host
launches a job on AMD cards with ROCR_/HIP_VISIBLE_DEVICES, one on NVIDIA cards with
CUDA_VISIBLE_DEVICES, and refuses one that mixes them; ``visible_env`` for any cards."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobkit import Jobs, kill_jobs, script, wait_until

from gputui.remote.launch import User, job_env
from gputui.remote.signals import RequestError
from gputui.remote.visible import visible_env

MIXED = "1xh100+2xmi300x+1xmi210,name=mixed-host"


@pytest.fixture
def jobs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "jobs"
    yield root
    kill_jobs(root)


@pytest.fixture
def jobs(start_helper: Callable[..., Any], jobs_root: Path) -> Jobs:
    env = dict(os.environ, GPUTUI_JOBS_ROOT=str(jobs_root))
    helper = start_helper(["--sim", MIXED, "--interval", "0.1"], env)
    helper.hello = helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


PRINT_ENV = script(
    "e = os.environ\n"
    'print("seen", repr(e.get("CUDA_VISIBLE_DEVICES")), repr(e.get("HIP_VISIBLE_DEVICES")),'
    ' repr(e.get("ROCR_VISIBLE_DEVICES")), flush=True)\n'
)


def _log_line(jobs: Jobs, job_id: int) -> str:
    jobs.wait_state(job_id, "exited")
    return wait_until(
        lambda: next((ln for ln in jobs.log(job_id).splitlines() if ln.startswith("seen")), None),
        what="the job's line",
    )


def test_each_vendors_job_sees_its_own_cards(jobs: Jobs) -> None:
    gpus = jobs.helper.hello["gpus"]
    assert [(g["vendor"], g["vendor_index"]) for g in gpus] == [
        ("nvidia", 0),
        ("amd", 0),
        ("amd", 1),
        ("amd", 2),
    ]
    nvidia, mi300a, mi300b, mi210 = (g["uuid"] for g in gpus)
    res = jobs.launch(1, PRINT_ENV, gpu_uuids=[mi300b, mi210], env={"ROCR_VISIBLE_DEVICES": "0"})
    assert res["ok"] is True, res
    # ROCr's names for the two cards; HIP counts from 0 among those; no NVIDIA card.
    assert _log_line(jobs, 1) == f"seen '' '0,1' '{mi300b},{mi210}'"
    res = jobs.launch(2, PRINT_ENV, gpu_uuids=[nvidia])
    assert res["ok"] is True, res
    assert _log_line(jobs, 2) == f"seen '{nvidia}' None None"
    res = jobs.call("launch", job_id=3, argv=PRINT_ENV, gpu_uuids=[nvidia, mi300a])
    assert res["ok"] is False and res["code"] == "bad-request"
    assert "mixes NVIDIA and AMD" in res["error"]


def test_a_job_on_amd_cards_loads_them(jobs: Jobs, tmp_path: Path) -> None:
    """The simulated card its environment names carries its load (GPUTUI_SIM_GPU)."""
    mi210 = jobs.helper.hello["gpus"][3]["uuid"]
    go = tmp_path / "go"
    body = f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n"
    res = jobs.launch(4, script(body), gpu_uuids=[mi210])
    assert res["ok"] is True, res
    pid = res["value"]["pid"]
    seen = jobs.helper.expect(
        lambda m: (
            m["type"] == "sample"
            and any(p["pid"] == pid for p in m["gpus"][3].get("processes", ()))
        )
    )
    assert all(not g.get("processes") for g in seen["gpus"][:3])
    go.touch()
    jobs.wait_state(4, "exited")


_UUID = st.builds(lambda n: f"GPU-{n:016x}", st.integers(1, 2**64 - 1))


@given(st.lists(_UUID, min_size=1, max_size=8, unique=True), st.data())
def test_visible_env_for_any_cards(gpus: list[str], data: st.DataObject) -> None:
    amd_subset = data.draw(st.sets(st.sampled_from(gpus)))
    others = data.draw(st.dictionaries(_UUID, st.just("9"), max_size=3))
    amd = {**{u: u for u in amd_subset}, **{u: v for u, v in others.items() if u not in gpus}}
    if not amd_subset:
        assert visible_env(gpus, amd) == {"CUDA_VISIBLE_DEVICES": ",".join(gpus)}
    elif len(amd_subset) < len(gpus):
        with pytest.raises(RequestError):
            visible_env(gpus, amd)
    else:
        env = visible_env(gpus, amd)
        assert env["ROCR_VISIBLE_DEVICES"].split(",") == gpus
        assert env["HIP_VISIBLE_DEVICES"].split(",") == [str(i) for i in range(len(gpus))]
        assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_job_env_drops_a_requested_rocm_visibility() -> None:
    user = User("u", 1000, 1000, "/home/u", "/bin/sh")
    asked = {"ROCR_VISIBLE_DEVICES": "0,1,2,3", "HIP_VISIBLE_DEVICES": "3"}
    env = job_env(user, asked, ["GPU-1"], 7, False)
    assert "ROCR_VISIBLE_DEVICES" not in env and "HIP_VISIBLE_DEVICES" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1"
    env = job_env(
        user, asked, ["GPU-00000000000000aa"], 7, False, amd={"GPU-00000000000000aa": "2"}
    )
    assert (env["ROCR_VISIBLE_DEVICES"], env["HIP_VISIBLE_DEVICES"]) == ("2", "0")
