"""A scheduler verb runs on every shell call: it must not pay for the heavy imports.

Checked in fresh interpreters with ``-X importtime`` (every module the process
imported, whatever imported it) for ``--help``, for a call that cannot reach the
head, and for a real submission to a live head.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from headthread import ThreadedHead

HEAVY = frozenset(
    {"textual", "rich", "pydantic", "sqlalchemy", "sqlmodel", "alembic", "asyncssh", "yaml"}
)
"""The console's and the daemon's libraries; ``asyncio`` is checked apart (see below)."""


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level names of every module ``gputui ARGS`` imported, and how it ended."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gputui.entry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "package":
                names.add(name.split(".")[0])
    assert "gputui" in names, done.stderr[-2000:]
    return names, done


def other_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize("verb", ["submit", "claim", "queue", "release", "run", "logs"])
def test_a_verbs_help_imports_nothing_heavy(verb: str) -> None:
    names, done = imported(verb, "--help")
    assert done.returncode == 0, other_lines(done)
    assert names & HEAVY == set()
    assert "asyncio" not in names


def test_a_verb_that_cannot_reach_the_head_stays_light(tmp_path: Path) -> None:
    names, done = imported("--socket", str(tmp_path / "nobody.sock"), "queue")
    assert done.returncode == 3
    assert other_lines(done) == [
        f"gputui queue: head unreachable at {tmp_path / 'nobody.sock'}: "
        "no socket there; is `gputui head` running?"
    ]
    assert names & HEAVY == set()


def test_a_real_submission_stays_light(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        names, done = imported(
            "--socket", str(th.sock), "submit", "--json", "-g", "1", "python", "train.py"
        )
        assert done.returncode == 0, other_lines(done)
        job = json.loads(done.stdout)
        assert th.rows("SELECT name, gpus FROM job WHERE id = ?", job["id"]) == [("python", 1)]
    assert names & HEAVY == set()
    assert "asyncio" not in names


def test_importing_the_verbs_module_loads_nothing_heavy() -> None:
    code = "import json, sys; import gputui.cli.jobs; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = {m.split(".")[0] for m in json.loads(done.stdout)}
    assert loaded & (HEAVY | {"asyncio"}) == set()
    assert not any(m.startswith("gputui.scheduler.daemon") for m in json.loads(done.stdout))
