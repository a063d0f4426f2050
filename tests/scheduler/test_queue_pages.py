"""``queue --all`` and ``claims --all`` page through everything, oldest first, and
never drop the front of the line without a word: the head answers a page and a
cursor (``next``), the CLI follows the pages up to its bound and says what it left
out. A real head (real SQLite file, real socket); the CLI run in this process with a
small page so that a few jobs make many pages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.cli import listing, verbs

HOST = "gpu01"
JOBS = 23


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ThreadedHead(tmp_path_factory.mktemp("pages"), {HOST: 1}) as th:
        with LineClient(th.sock) as c:
            for n in range(JOBS):  # one runs, the rest wait; a few end
                job = c.ok("submit", {"argv": ["x"], "gpus": 1, "name": f"j{n}"})["job"]
                if n % 5 == 4:
                    c.ok("cancel", {"job_id": job["id"]})
        yield th


def everything(c: LineClient, op: str, limit: int, **args: Any) -> list[int]:
    key = "jobs" if op == "queue" else "claims"
    ids: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        page = c.ok(op, {**args, "limit": limit, "after": after})
        assert len(page[key]) <= limit
        ids += [item["id"] for item in page[key]]
        after = page["next"]
        pages += 1
        assert pages <= len(ids) + 1, "a page that moves nothing on"
    return ids


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(limit=st.integers(min_value=1, max_value=JOBS + 3), everyone=st.booleans())
def test_following_the_pages_gives_every_job_once_oldest_first(
    head: ThreadedHead, limit: int, everyone: bool
) -> None:
    with LineClient(head.sock) as c:
        ids = everything(c, "queue", limit, all=everyone)
    states = "" if everyone else " WHERE state NOT IN ('cancelled')"
    assert ids == [r[0] for r in head.rows(f"SELECT id FROM job{states} ORDER BY id")]


def test_claims_page_the_same_way(head: ThreadedHead) -> None:
    with LineClient(head.sock) as c:
        for _ in range(5):
            c.ok("claim", {"gpus": 1})
        ids = everything(c, "claims", 2, all=True)
    assert ids == [r[0] for r in head.rows("SELECT id FROM claim ORDER BY id")]
    assert len(ids) == 5


def test_the_cli_shows_every_page_and_says_what_its_bound_left_out(
    head: ThreadedHead, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(listing, "PAGE", 4)
    assert verbs.main(["--socket", str(head.sock), "queue", "--all", "--json"]) == 0
    out, err = capsys.readouterr()
    shown = [job["name"] for job in json.loads(out)]
    assert shown == [f"j{n}" for n in range(JOBS)] and err == ""
    monkeypatch.setattr(listing, "MAX_PAGES", 2)
    assert verbs.main(["--socket", str(head.sock), "queue", "--all"]) == 0
    out, err = capsys.readouterr()
    assert "j7" in out and "j8" not in out
    (first_job,) = head.rows("SELECT min(id) FROM job")
    assert err == (
        f"gputui queue: the first 8 shown, more after id {first_job[0] + 7} not shown"
        " (narrow it with --user)\n"
    )
