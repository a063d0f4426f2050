"""force-free's step lines in Chinese: each outcome the head forms travels as words
beside its English line (``outcome_words``), the English unchanged, and the CLI's
step line shows it with no English left but the data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import forcefree
from gputui.common import i18n
from gputui.scheduler.head.forcefree import _reset_words
from gputui.scheduler.head.forcefree_tx import Stopped
from gputui.wire.words import Words, joined, say

sys.path.insert(0, str(Path(__file__).resolve().parent))
from untranslated import english_words

UUID = "GPU-9402681f-397d-7f4f-8b6c-d4783a3a11d5"


def _step(code: str, said: Words) -> dict[str, Any]:
    """A step as the head pushes it, through JSON as it travels."""
    view = {"step": code, "ok": True, "outcome": said.english(), "outcome_words": said.wire()}
    return dict(json.loads(json.dumps(view)))


def _stopped(jobs: list[int], claims: list[int], strays: int, refused: int) -> Stopped:
    done = Stopped(jobs=jobs, claims=claims)
    why = say("no job {job}", job=7)  # the head's refusal, as its words
    done.refused = [say("job {job} not killed: {why}", job=j, why=why) for j in range(refused)]
    return done


def _old_stop_line(jobs: list[int], claims: list[int], strays: int, refused: int) -> str:
    """The stop step's English line as the head wrote it before it had words."""
    parts = []
    if jobs:
        parts.append("killing job " + ", ".join(str(j) for j in jobs))
    if claims:
        parts.append("released claim " + ", ".join(str(c) for c in claims))
    if strays:
        parts.append(f"{strays} other process{'es' if strays != 1 else ''} to signal")
    parts += [f"job {j} not killed: no job 7" for j in range(refused)]
    return "; ".join(parts) or "nothing ran there"


ids = st.lists(st.integers(1, 10**6), max_size=4)


@given(jobs=ids, claims=ids, strays=st.integers(0, 40), refused=st.integers(0, 10))
def test_the_stop_steps_english_is_as_before_and_its_words_are_chinese(
    jobs: list[int], claims: list[int], strays: int, refused: int
) -> None:
    said = _stopped(jobs, claims, strays, refused).outcome(strays)
    assert said.english() == _old_stop_line(jobs, claims, strays, refused)
    i18n.reset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LANG", "zh_CN.UTF-8")
        mp.delenv("LC_ALL", raising=False)
        mp.delenv("LC_MESSAGES", raising=False)
        i18n.reset()
        line = forcefree.step_line(_step("stop", said))
        i18n.reset()
    assert english_words(line) == [], line


def _reset_value(**kw: Any) -> dict[str, Any]:
    return {"index": 0, "uuid": UUID, "reset": True, "via": "nvidia-smi", **kw}


@pytest.mark.parametrize(
    "value",
    [
        _reset_value(message="", mem_used_mib=3, processes=0),
        _reset_value(message="", mem_used_mib=20480, processes=1),
        _reset_value(message=""),
        _reset_value(reset=False, error="timeout", via="nvml", message=""),
    ],
)
def test_the_reset_steps_outcome_in_chinese(chinese: None, value: dict[str, Any]) -> None:
    _, said = _reset_words(value)
    line = forcefree.step_line(_step("reset", said))
    assert english_words(line, {"timeout"}) == [], line


def test_the_signal_steps_in_chinese(chinese: None) -> None:
    parts = [
        say("pid {pid}{who} {signal} delivered", pid=11, who=" (alice)", signal="SIGTERM"),
        say("pid {pid}{who} gone already", pid=12, who=""),
        say("pid {pid}{who} not signalled: {why}", pid=13, who="", why="EPERM"),
        say("pid {pid}{who} gone already", pid=14, who=""),
        *(say("pid {pid}{who} gone already", pid=p, who="") for p in range(15, 25)),
    ]
    for n in range(1, len(parts) + 1):  # past eight, seven and how many more
        said = joined(parts[:n])
        line = forcefree.step_line(_step("sigterm", said))
        assert english_words(line, {"alice", "EPERM"}) == [], line
        assert ("另有" in line) == (n > 8), line
    assert joined(parts).english() == "; ".join(p.english() for p in parts)
    assert forcefree.step_line(_step("memory", say("not needed: nothing left"))).split()[:2] == [
        "显存",
        "成功",
    ]
