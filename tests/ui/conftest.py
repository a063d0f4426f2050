"""Fixtures for the console's tests: a fake source and control, a fixed clock, UTC time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from ui_fakes import FakeControl, FakeSource, fixed_clock

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The header clock shows local time; pin it so screenshots match everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def source() -> FakeSource:
    return FakeSource()


@pytest.fixture
def control() -> FakeControl:
    return FakeControl()


@pytest.fixture
def app(source: FakeSource, control: FakeControl) -> GpuTuiApp:
    return GpuTuiApp(source, Config(), clock=fixed_clock, control=control)
