"""``gputui logs`` against scripted ``logs`` answers: the run a head says it read
(a requeued job's new run is read from its start, after one line), a head that does
not say (today's reading by offset), and whatever else a head might answer."""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import jobs
from gputui.scheduler.client.backend import SyncBackend


class Answers:
    """Answers ``logs`` from a script of logs by run: ``runs[i]`` is (run, text) for
    the i-th question on; the asked offsets are kept."""

    def __init__(self, runs: list[tuple[int | None, str]], state: str = "completed") -> None:
        self.runs, self.state, self.asked = runs, state, list[int]()

    def logs(self, job_id: int, *, offset: int = 0, **_: Any) -> dict[str, Any]:
        run, text = self.runs[min(len(self.asked), len(self.runs) - 1)]
        self.asked.append(offset)
        start = min(offset, len(text))
        body: dict[str, Any] = {
            "data": text[start:],
            "offset": len(text),
            "size": len(text),
            "ended": True,
            "state": "running" if len(self.asked) < len(self.runs) else self.state,
        }
        if run is not None:
            body["run"] = run
        return body


def follow(answers: Answers) -> str:
    out = io.StringIO()
    a = argparse.Namespace(job=7, follow=True)
    with contextlib.redirect_stdout(out):
        assert jobs.logs(cast(SyncBackend, answers), a) == 0
    return out.getvalue()


def test_a_new_run_is_read_from_its_start_after_a_line_saying_so() -> None:
    answers = Answers([(1, "one\ntwo\nthree\n"), (2, "new\n"), (2, "new\n")])
    assert follow(answers) == "one\ntwo\nthree\n--- job 7: run 2 (requeued) ---\nnew\n"
    assert answers.asked == [0, 14, 0, 4]


def test_the_line_starts_a_line_of_its_own_after_output_without_one() -> None:
    answers = Answers([(1, "half a li"), (2, "new\n"), (2, "new\n")])
    assert follow(answers) == "half a li\n--- job 7: run 2 (requeued) ---\nnew\n"


def test_the_first_run_of_a_job_that_waited_has_no_line() -> None:
    answers = Answers([(0, ""), (1, "first\n"), (1, "first\n")])
    assert follow(answers) == "first\n"


def test_a_head_that_does_not_say_the_run_is_read_by_offset_as_before() -> None:
    answers = Answers([(None, "one\ntwo\nthree\n"), (None, "new\n"), (None, "new\n")])
    assert follow(answers) == "one\ntwo\nthree\n"
    assert answers.asked == [0, 14, 4]


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)))
def test_a_run_that_is_not_a_run_number_is_not_taken_for_one(run: object) -> None:
    got = jobs.run_of({"run": run})
    if got is None:
        return
    assert type(run) is int and got == run and 0 <= got <= 2**31
