"""The claim plan (which GPUs a claim of N takes) and tmux's clipboard answer, on
generated input."""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.ui.clipboard import outcome, tmux_setting
from gputui.ui.head.claim_plan import QUESTION_W, ClaimPlan, Pick, plan_claim
from gputui.ui.head.view import HeadView
from gputui.ui.model import ClusterModel

HOSTS = ["gpu01", "gpu02", "gpu03"]

gpu_state = st.fixed_dictionaries(
    {
        "held": st.booleans(),
        "state": st.sampled_from(["ok", "ok", "ok", "drained", "unhealthy"]),
        "pool": st.sampled_from(["a100", "rtx"]),
    }
)


def view_of(layout: dict[str, list[dict[str, Any]]], live: dict[str, bool]) -> HeadView:
    gpus = []
    for host, cards in layout.items():
        for i, card in enumerate(cards):
            holder = {"kind": "job", "id": 9, "user": "x"} if card["held"] else None
            gpus.append(
                {
                    "uuid": f"GPU-{host}-{i}",
                    "host": host,
                    "index": i,
                    "pool": card["pool"],
                    "state": card["state"],
                    "holder": holder,
                }
            )
    hosts = {h: {"live": live.get(h, True)} for h in layout}
    return HeadView.parse({"me": {"uid": 1, "user": "me"}, "gpus": gpus, "hosts": hosts})


@settings(max_examples=200, deadline=None)
@given(
    layout=st.dictionaries(
        st.sampled_from(HOSTS), st.lists(gpu_state, max_size=8), min_size=1, max_size=3
    ),
    live=st.dictionaries(st.sampled_from(HOSTS), st.booleans()),
    count=st.integers(2, 8),
    pool=st.sampled_from([None, "a100", "rtx"]),
    host=st.sampled_from([None, *HOSTS]),
)
def test_a_plan_takes_only_free_cards_of_one_host_or_none(
    layout: dict[str, list[dict[str, Any]]],
    live: dict[str, bool],
    count: int,
    pool: str | None,
    host: str | None,
) -> None:
    view = view_of(layout, live)
    args = {"gpus": count, "pool": pool, "host": host, "note": "n", "wait": True}
    plan = plan_claim(view, ClusterModel(), args)

    def usable(h: str) -> list[str]:
        return [
            f"GPU-{h}-{i}"
            for i, c in enumerate(layout[h])
            if not c["held"] and c["state"] == "ok" and (pool is None or c["pool"] == pool)
        ]

    fits = [
        h for h in layout if live.get(h, True) and (host in (None, h)) and len(usable(h)) >= count
    ]
    # Ever: a host allowed with that many cards of the pool, whoever holds them now.
    ever = any(
        host in (None, h) and sum(pool in (None, c["pool"]) for c in cards) >= count
        for h, cards in layout.items()
    )
    assert plan.never is (not fits and not ever)
    if not fits:
        assert plan.picks == () and plan.request(args) == args
        assert "waits in line" in plan.question(args).plain
        return
    assert len(plan.picks) == count and plan.host in fits
    uuids = [p.gpu.uuid for p in plan.picks]
    assert set(uuids) <= set(usable(plan.host or ""))
    sent = plan.request(args)
    assert sent["gpu_refs"] == uuids and sent["wait"] is False and "gpus" not in sent
    assert sent["note"] == "n"
    question = plan.question(args).plain
    assert f"Claim {count} GPUs on {plan.host}" in question
    assert all(u in question for u in uuids[:8])


def test_each_gpu_of_the_question_is_one_line_that_fits_80_columns() -> None:
    # Seen in tmux at 80x24: "1  GPU-<uuid>  A100-SXM4-80GB" then "(busy)" alone on
    # the next line (the full model name pushed it past the dialog's edge).
    uuid = "GPU-09302d25-3242-2dd9-c17c-3981e1f79594"
    view = HeadView.parse(
        {
            "me": {"uid": 0, "user": "root"},
            "gpus": [
                {"uuid": uuid[:-1] + str(i), "host": "gpu01", "index": i, "state": "ok"}
                for i in (1, 4)
            ],
        }
    )
    names = ["NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4080 SUPER Founders Edition"]
    picks = tuple(Pick(g, n, 2, 12_000) for g, n in zip(view.gpus, names, strict=True))
    text = ClaimPlan(2, picks).question({"duration_s": 7200, "note": "x"}).plain
    lines = text.splitlines()
    for pick in picks:
        (line,) = [line for line in lines if pick.gpu.uuid in line]
        assert line.endswith("(busy)") and len(line) <= QUESTION_W, line
    assert "A100-80G" in text and "4080S" in text


def test_what_a_copy_did_is_said_for_each_tmux_setting() -> None:
    assert outcome(False, None).sure
    assert outcome(True, "on").sure
    for setting in ("external", "off"):
        copied = outcome(True, setting)
        assert not copied.sure and "tmux set -g set-clipboard on" in copied.how
    assert not outcome(True, None).sure


def tmux_printing(tmp: Path, body: str) -> dict[str, str]:
    exe = tmp / "tmux"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {"PATH": str(tmp)}


async def test_tmux_that_hangs_or_is_missing_counts_as_unknown(tmp_path: Path) -> None:
    assert await tmux_setting({"PATH": str(tmp_path / "nowhere")}) is None
    env = tmux_printing(tmp_path, "exec sleep 30")
    started = time.monotonic()
    assert await tmux_setting(env, timeout=0.2) is None
    assert time.monotonic() - started < 5  # killed, not waited for
    # (60 s: a loaded machine can take past the console's second to start a script)
    assert await tmux_setting(tmux_printing(tmp_path, "echo ON; exit 0"), 60) == "on"
    assert await tmux_setting(tmux_printing(tmp_path, "echo on; exit 1"), 60) is None


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(answer=st.binary(max_size=200))
async def test_any_answer_of_tmux_is_one_of_three_or_unknown(tmp_path: Path, answer: bytes) -> None:
    (tmp_path / "answer").write_bytes(answer)
    env = tmux_printing(tmp_path, f"cat '{tmp_path / 'answer'}'")
    got = await tmux_setting(env, 60)
    assert got in (None, "on", "external", "off")
    if got is not None:
        assert answer.strip().lower().decode() == got


def test_the_question_names_each_card_as_the_grid_does() -> None:
    """Its short label with its memory (``H100-80G``: NVML's name has no size), the
    grid's, not the bare family."""
    from ui_fakes import gpu, hello, sample

    from gputui.telemetry import HostSnapshot, HostStatus

    model = ClusterModel()
    model.apply(
        HostSnapshot(
            name="gpu01",
            address="10.0.0.1",
            status=HostStatus.LIVE,
            hello=hello("gpu01", "NVIDIA H100 PCIe", 2, 81_559, 350.0),
            sample=sample(1, time.time(), [gpu("gpu01", 0), gpu("gpu01", 1)]),
        )
    )
    seen = [g for g in model.iter_gpus() if g.host == "gpu01"]
    gpus = [{"uuid": g.uuid, "host": "gpu01", "index": g.index, "state": "ok"} for g in seen]
    view = HeadView.parse({"me": {"uid": 1, "user": "me"}, "gpus": gpus})
    plan = plan_claim(view, model, {"gpus": 2})
    assert len(plan.picks) == 2
    labels = {g.uuid: g.label for g in seen}
    assert set(labels.values()) == {"H100-80G"}
    for line in plan.question({}).plain.splitlines()[1:3]:
        uuid = line.split()[1]
        assert f"{uuid}  {labels[uuid]}" in line, line
