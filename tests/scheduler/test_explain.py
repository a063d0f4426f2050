"""``explain`` and ``quota`` from a live head, and the submission rules of classes:
who may use one, its time default and maximum, ``--after`` checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import verbs
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import actions, standings
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.policy import explain, model
from gputui.scheduler.server.op_args import SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

SCHED = SchedulerConfig.model_validate(
    {
        "classes": [
            {"name": "urgent", "groups": ["oncall"]},
            {"name": "normal", "time_max_hours": 48},
            {"name": "low", "preemptible": True, "time_default_hours": 2},
        ],
        "quotas": [{"group": "root", "gpu_hours_per_week": 500}],
        "fair_share": {"shares": {"root": 2}},
    },
    strict=False,
)


def _state(client: LineClient, job_id: int) -> dict[str, object]:
    return dict(client.ok("show", {"job_id": job_id})["job"])


def test_explain_shows_the_place_the_factors_what_is_ahead_and_an_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = SettableClock()
    with ThreadedHead(tmp_path, {"gpu01": 4}, rules=Rules(sched=SCHED), clock=clock) as th:
        with LineClient(th.sock) as c:
            big = c.ok("submit", {"argv": ["train"], "gpus": 4, "time_limit_s": 3600})["job"]
            poll(lambda: _state(c, big["id"])["state"] == "running", what="the 4-GPU job")
            started = float(str(_state(c, big["id"])["started_at"]))
            waits = c.ok("submit", {"argv": ["eval"], "gpus": 2, "time_limit_s": 600})["job"]
            after = c.ok("submit", {"argv": ["more"], "gpus": 1, "priority": "low"})["job"]
            poll(lambda: _state(c, after["id"])["reason"] != "Resources" or True)
            first = c.ok("explain", {"job_id": waits["id"]})
            second = c.ok("explain", {"job_id": after["id"]})
            # Use is counted again at the scheduler's next refresh of its figures.
            th.in_loop(lambda: clock.advance(standings.REFRESH_S))
            quota = poll(lambda: (q := c.ok("quota"))["quotas"][0]["used_gpu_h"] > 0 and q)
        assert first["position"] == 1 and first["in_line"] == 2
        assert first["reason"] == model.RESOURCES
        assert first["reservation"]["host"] == "gpu01"
        assert first["reservation"]["start"] == pytest.approx(started + 3600, abs=2)
        assert first["estimate"]["start"] == pytest.approx(started + 3600, abs=2)
        f = first["factors"]
        assert (f["class"], f["class_rank"], f["group"], f["share"]) == ("normal", 2, "root", 2)
        assert f["quotas"][0]["limit_gpu_h"] == 500 and not f["quotas"][0]["over"]
        # The low job (2 h by its class's default) waits behind the reservation.
        assert second["position"] == 2
        assert [a["id"] for a in second["ahead"]] == [waits["id"]]
        assert second["job"]["time_limit_s"] == 7200
        assert second["estimate"]["start"] == pytest.approx(started + 3600, abs=2)
        assert quota["quotas"][0]["group"] == "root"
        assert 0 < quota["quotas"][0]["used_gpu_h"] < 1  # 4 GPUs for a minute
        # The CLI's text shows the same, one fact a line.
        code = verbs.main(["--socket", str(th.sock), "explain", str(waits["id"])])
        text = capsys.readouterr().out
        assert code == 0
        assert "place in line: 1 of 2" in text
        assert "class          normal (2 of 3: urgent, normal, low)" in text
        assert "reservation: gpu01 from " in text and "estimated start: " in text
        code = verbs.main(["--socket", str(th.sock), "quota", "--json"])
        assert json.loads(capsys.readouterr().out)["quotas"][0]["limit_gpu_h"] == 500
        code = verbs.main(["--socket", str(th.sock), "explain", "999"])
        assert code == 1 and capsys.readouterr().err == "gputui explain: no job 999\n"
        assert th.problems == []


ALICE = Caller(uid=1001, user="alice", group="alice", groups=frozenset({"alice"}), admin=False)
PAGER = Caller(uid=1002, user="pat", group="pat", groups=frozenset({"pat", "oncall"}), admin=False)
SLOTS = tuple(model.GpuSlot(f"GPU-{i}", "gpu01", i, pool="a100") for i in range(4))


def _submit(tmp_path: Path, caller: Caller, **args: object) -> dict[str, object]:
    store = SqlStore(open_store(tmp_path / "db" / "g.db"))
    ctx = actions.Context(
        now=1.0,
        slots=SLOTS,
        pools=frozenset({"a100"}),
        hosts=frozenset({"gpu01"}),
        rules=Rules(sched=SCHED),
    )
    try:
        with store.transaction() as tx:
            return dict(actions.submit(tx, caller, SubmitArgs(argv=["t"], **args), ctx)["job"])
    finally:
        store.close()


def test_a_class_is_only_for_its_groups(tmp_path: Path) -> None:
    with pytest.raises(Refusal, match="priority urgent is for the groups oncall only"):
        _submit(tmp_path, ALICE, priority="urgent")
    assert _submit(tmp_path, PAGER, priority="urgent")["priority"] == "urgent"
    with pytest.raises(Refusal, match=r"unknown priority 'night' \(classes: urgent, normal, low\)"):
        _submit(tmp_path, ALICE, priority="night")


def test_time_default_and_maximum_per_class(tmp_path: Path) -> None:
    assert _submit(tmp_path, ALICE, priority="low")["time_limit_s"] == 7200
    assert _submit(tmp_path, ALICE)["time_limit_s"] == 48 * 3600  # the max when none given
    with pytest.raises(Refusal, match=r"--time is over priority normal's maximum \(48 h\)"):
        _submit(tmp_path, ALICE, time_limit_s=49 * 3600)


def test_after_names_jobs_that_exist(tmp_path: Path) -> None:
    first = _submit(tmp_path, ALICE)
    second = _submit(tmp_path, ALICE, after=[first["id"]], after_ok=True)
    assert second["after"] == [first["id"]] and second["after_ok"] is True
    with pytest.raises(Refusal, match="--after: no job 77"):
        _submit(tmp_path, ALICE, after=[first["id"], 77])
    with pytest.raises(Refusal, match=r"submit: --after-ok: no job 9999$"):
        _submit(tmp_path, ALICE, after=[9999], after_ok=True)


def test_after_and_after_ok_together_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th:
        code = verbs.main(
            ["--socket", str(th.sock), "submit", "--after", "1", "--after-ok", "2", "--", "x"]
        )
    assert code == 2
    assert capsys.readouterr().err == "gputui submit: give --after or --after-ok, not both\n"


def test_explain_on_a_drained_host_blames_the_drain_not_work_without_a_limit(
    tmp_path: Path,
) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th, LineClient(th.sock) as c:
        c.ok("drain", {"target": "gpu01", "reason": "maintenance"})
        job = c.ok("submit", {"argv": ["train"], "gpus": 1, "time_limit_s": 600})["job"]
        poll(lambda: _state(c, job["id"])["reason"] == model.DRAINED, what="Drained")
        told = c.ok("explain", {"job_id": job["id"]})
        assert told["estimate"]["start"] is None
        assert "drained" in told["estimate"]["why"]
        assert "no time limit" not in told["estimate"]["why"]
        assert th.problems == []


slot_states = st.lists(st.sampled_from(["ok", "drained", "fenced", "down"]), min_size=1, max_size=4)


@given(hosts=st.lists(slot_states, min_size=1, max_size=3), gpus=st.integers(1, 4))
def test_no_estimate_is_ever_blamed_on_work_without_a_limit_when_none_runs(
    hosts: list[list[str]], gpus: int
) -> None:
    """With nothing running, a job has a start now, or the reason is what keeps the
    GPUs out of use (or that no host is big enough): never "work with no time limit"."""
    slots = tuple(
        model.GpuSlot(
            f"GPU-{h}-{i}",
            f"h{h}",
            i,
            drained=state == "drained",
            healthy=state == "ok" or state == "drained",
            fenced=state == "fenced",
        )
        for h, states in enumerate(hosts)
        for i, state in enumerate(states)
    )
    want = model.Want("job", 1, gpus, user="u", time_limit_s=600.0)
    view = model.ClusterView(gpus=slots, waiting=(want,), running=(), now=1000.0)
    guess = explain.estimate_start(view, want)
    if guess.start is None:
        assert "no time limit" not in guess.why_none
        assert guess.why_none in explain.NO_ROOM_EVER.values()
    else:
        assert guess.start == 1000.0
