"""Suite-wide fixtures: every test runs isolated from the developer's own setup.

Also the helpers the SSH tests share (fleet and integration): ``wait`` (poll a
condition until a deadline, never a bare sleep), ``free_port``, ``fast_timing`` and
``fleets`` (start fleets that are closed at teardown).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gputui.config import Config
    from gputui.fleet.backoff import LinkTiming
    from gputui.fleet.fleet import Fleet

WaitFor = Callable[..., Awaitable[Any]]
StartFleet = Callable[..., Awaitable["Fleet"]]


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh HOME with no ssh config, gputui config or themes of the person running tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("GPUTUI_HOSTS", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield home


async def wait_for(
    predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after
    ``timeout`` seconds, naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(scope="session")
def wait() -> WaitFor:
    """The async ``wait_for(predicate, timeout=15, what=...)``."""
    return wait_for


def unused_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (just now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """Returns ``unused_port``: call it for each port needed."""
    return unused_port


def fast_link_timing() -> LinkTiming:
    """Reconnects in well under a second, so tests of failures stay quick."""
    from gputui.fleet.backoff import LinkTiming

    return LinkTiming(
        backoff_base=0.2, backoff_cap=0.5, slow_retry=30.0, hello_timeout=10.0, close_timeout=2.0
    )


@pytest.fixture
def fast_timing() -> LinkTiming:
    return fast_link_timing()


@pytest.fixture
async def fleets() -> AsyncIterator[StartFleet]:
    """``await fleets(config, **kwargs)`` starts a ``Fleet`` (fast timing unless
    ``timing=`` is given); every fleet started is closed at teardown."""
    from gputui.fleet.fleet import Fleet

    started: list[Fleet] = []

    async def start(config: Config, **kwargs: Any) -> Fleet:
        timing = kwargs.pop("timing", None) or fast_link_timing()
        fleet = Fleet(config, timing=timing, **kwargs)
        await fleet.start()
        started.append(fleet)
        return fleet

    yield start
    for fleet in started:
        await fleet.close()
