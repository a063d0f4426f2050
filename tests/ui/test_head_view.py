"""The head's pushed state, parsed: anything malformed is left out, nothing raises."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.ui.head.view import HeadView, age_text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
FIELDS = ("id", "user", "name", "state", "gpus", "since", "holder", "uuid", "kind", "live")


def _job(**over: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"id": 3, "user": "alice", "name": "train", "state": "running"}
    job.update(over)
    return job


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(("me", "jobs", "claims", "gpus", "hosts")),
        JSON | st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON), max_size=4),
    )
)
def test_any_state_parses_without_raising(state: dict[str, Any]) -> None:
    view = HeadView.parse(state)
    for job in view.jobs:
        assert job.id >= 1 and isinstance(job.name, str)
    for gpu in view.gpus:
        assert gpu.uuid and (gpu.holder is None or gpu.holder.kind in ("job", "claim"))


def test_strings_from_the_head_are_cleaned_and_bad_rows_dropped() -> None:
    view = HeadView.parse(
        {
            "me": {"uid": 0, "user": "root", "admin": True},
            "jobs": [
                _job(name="evil\x1b[31mred\x07"),
                _job(id=True),  # a bool is not an id
                _job(id="7"),
                "not a job",
                _job(id=4, started_at=float("nan"), gpus=-1),
            ],
            "gpus": [
                {
                    "uuid": "GPU-1",
                    "host": "h",
                    "index": 0,
                    "holder": {"kind": "job", "id": 3, "user": "alice\n", "since": 10},
                },
                {"uuid": "GPU-2", "holder": {"kind": "other", "id": 3}},
                {"host": "no uuid"},
            ],
        }
    )
    assert [j.id for j in view.jobs] == [3, 4]
    assert "\x1b" not in view.jobs[0].name and "red" in view.jobs[0].name
    assert view.jobs[1].started_at is None and view.jobs[1].gpus == 0
    assert view.holders() == {"GPU-1": view.gpus[0].holder}
    assert view.gpus[0].holder is not None and view.gpus[0].holder.user == "alice"
    assert view.me.admin and view.me.user == "root"


def test_ages_change_once_a_minute() -> None:
    assert [age_text(s) for s in (None, -1, 0, 59, 60, 3599, 3600, 90_000)] == [
        "-",
        "-",
        "<1m",
        "<1m",
        "1m",
        "59m",
        "1h00m",
        "1d01h",
    ]
