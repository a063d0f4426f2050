"""The console runs with the collector paced as the head does (``pace_collector``).

A console through the head at 1,000 hosts replaces thousands of objects a second; at
Python's default pace the collector rescans them, a quarter of the console's CPU
and a full collection of about 0.2 s every minute or so (``bench/consoles.py``).
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import console, console_app
from gputui.cli import head as head_cli
from gputui.common import collector
from gputui.common.collector import GC_THRESHOLDS, YOUNG_PER_HOST, thresholds
from gputui.config.loader import parse_config
from gputui.scheduler.head.settings import HeadSettings
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


@given(hosts=st.integers(min_value=-10, max_value=1_000_000))
def test_a_head_collects_young_objects_past_what_its_hosts_samples_keep(hosts: int) -> None:
    young, middle, old = thresholds(hosts)
    assert young >= GC_THRESHOLDS[0]  # never more often than a console
    assert young >= YOUNG_PER_HOST * hosts  # the samples' own coming and going: not a cause
    assert young <= max(GC_THRESHOLDS[0], YOUNG_PER_HOST * hosts)  # and no later
    assert (middle, old) == GC_THRESHOLDS[1:]
    assert thresholds() == GC_THRESHOLDS  # a console's


def test_the_head_paces_the_collector_by_the_hosts_it_lists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``gputui head`` paces the collector by the hosts its config lists, and its
    threads' turns, before it starts anything."""

    class Paced(Exception):
        pass

    seen: list[object] = []

    def pace(hosts: int = 0) -> None:
        seen.extend([hosts, sys.getswitchinterval()])
        raise Paced  # (before the head starts anything)

    monkeypatch.setattr(collector, "pace_collector", pace)
    listed = "".join(f"  - name: gpu{i:03}\n" for i in range(301))
    config = parse_config(f"hosts:\n{listed}", "hosts.yaml")
    settings = HeadSettings(socket=tmp_path / "head.sock")
    store: Any = None  # (never reached)
    switch = sys.getswitchinterval()
    stop = asyncio.Event()
    try:
        with pytest.raises(Paced):
            asyncio.run(head_cli._lead(config, settings, store, None, stop, keeping=None))
    finally:
        sys.setswitchinterval(switch)
    # ...and gives its waiting threads the interpreter sooner than Python's 5 ms.
    assert seen == [301, head_cli.SWITCH_INTERVAL_S]
    assert switch > head_cli.SWITCH_INTERVAL_S
