"""The console runs with the collector paced as the head does (``pace_collector``).

A console through the head at 1,000 hosts replaces thousands of objects a second; at
Python's default pace the collector rescans them, a quarter of the console's CPU
and a full collection of about 0.2 s every minute or so (``bench/consoles.py``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gputui.cli import console, console_app
from gputui.common.collector import GC_THRESHOLDS
from gputui.ui import terminal_exit


@pytest.fixture
def default_pace() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_the_console_runs_with_the_collector_paced(
    default_pace: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[int, ...]] = []

    class Signals:
        def __enter__(self) -> Signals:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        async def run(self, app: Any) -> None:
            seen.append(gc.get_threshold())  # what the running console has

    monkeypatch.setattr(console_app, "console_app", lambda *a, **k: SimpleNamespace(return_code=0))
    monkeypatch.setattr(terminal_exit, "SignalExit", Signals)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: [{name: gpu01, local: true}]\n")
    hosts.chmod(0o644)
    assert console.run_console(str(hosts), None) == 0
    assert seen == [GC_THRESHOLDS]
    assert GC_THRESHOLDS[0] >= 50_000  # a young collection per some tens of thousands
