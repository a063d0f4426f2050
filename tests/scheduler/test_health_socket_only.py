"""``gputui health`` with only a socket (``$GPUTUI_HEAD_SOCKET`` or ``--socket``) and no
hosts.yaml anywhere: it asks that head, as ``gputui queue`` does, rather than saying
no hosts.yaml was found. A real head on a real socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from headthread import ThreadedHead

from gputui import entry


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory and HOME with no hosts.yaml (the autouse HOME is fresh)."""
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    assert not Path("/etc/gputui/hosts.yaml").exists()
    return here


def test_health_with_only_the_socket_variable_asks_that_head(
    tmp_path: Path,
    nowhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 1}) as th:
        monkeypatch.setenv("GPUTUI_HEAD_SOCKET", str(th.sock))
        assert entry.main(["health", "--json"]) in (0, 1, 4)
        report = json.loads(capsys.readouterr().out)
        assert report["hosts"] == 2 and report["notes"] == []
        monkeypatch.delenv("GPUTUI_HEAD_SOCKET")
        code = entry.main(["--socket", str(th.sock), "health"])
        out = capsys.readouterr().out
        assert code in (0, 1, 4) and "on 2 hosts" in out, out
        assert th.problems == []


def test_health_with_a_socket_where_no_head_answers_says_so_in_one_line(
    tmp_path: Path,
    nowhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GPUTUI_HEAD_SOCKET", str(tmp_path / "none.sock"))
    assert entry.main(["health"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("gputui health: head unreachable at"), err
