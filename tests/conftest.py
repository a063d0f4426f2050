"""Suite-wide fixtures: every test runs isolated from the developer's own setup.

Also the helpers the SSH tests share (fleet and integration): ``wait`` (poll a
condition until a deadline, never a bare sleep), ``free_port``, ``fast_timing``,
``fleets`` (start fleets that are closed at teardown) and ``ssh_agent`` (a real
ssh-agent of the test's own).

The suite runs in parallel (pytest-xdist) and beside other runs on one machine, so
each test process simulates GPUs of its own (``simscope``) and takes ports no other
can be given (``unused_port``). The tests that need root (marked ``root``) or a
real sshd (``sshd``) run a module to a worker, those on the test Slurm in one, and
make and delete Unix users one process at a time (``privileged.account``); under
root none of them may skip: a skip there is reported as a failure (``privileged``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import simscope
from hypoprofiles import scale_examples
from privileged import fail_skips_under_root, group_privileged

from gputui.common import i18n

if TYPE_CHECKING:
    from gputui.config.models import Config
    from gputui.fleet.backoff import LinkTiming
    from gputui.fleet.fleet import Fleet

WaitFor = Callable[..., Awaitable[Any]]
StartFleet = Callable[..., Awaitable["Fleet"]]

# migrate_once: a new store's schema, migrated once; pg_server: a real PostgreSQL
# server for the store suite (started only by a test that asks); pytester: tests of
# the hooks here; hangwatch: a test stuck past its timeout ends its process, named
pytest_plugins = ["storetemplate", "pgserver", "slurmcluster", "pytester", "hangwatch"]


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""What a test may set, and what its processes inherit when it is set to ignore."""


def pytest_configure(config: pytest.Config) -> None:
    simscope.claim()
    # A suite started in the background (``make test &``, a CI step, nohup) has ^C
    # ignored, and every process a test starts would inherit that: the tests that
    # interrupt a ``gputui`` process as a terminal does would wait for nothing.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Hypothesis times the collector from ``gc.callbacks``. A worker that xdist
    # interrupts as it shuts down can be inside that callback, and the run's last
    # lines were then "Exception ignored in: gc_callback ... KeyboardInterrupt". The
    # tests are over here: the callback goes.
    gc.callbacks[:] = [
        cb for cb in gc.callbacks if not getattr(cb, "__module__", "").startswith("hypothesis.")
    ]


@pytest.fixture(autouse=True)
def signals_kept() -> Iterator[None]:
    """Each test leaves the signal dispositions as it found them (code under test that
    ignores ^C for good, as ``gputui run`` does as it ends, is run in-process too)."""
    before = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    yield
    for sig, handler in before.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group_privileged(items)
    scale_examples(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    fail_skips_under_root(item, outcome.get_result())  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh HOME with no ssh config, gputui config or themes of the person running
    tests, and none of their terminal width or head socket."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the verbs keep hosts.yaml here
    monkeypatch.delenv("GPUTUI_HOSTS", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    # The person's (or CI's) terminal width is not the tests': a CLI table fits COLUMNS
    # only where a test sets it.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("GPUTUI_HEAD_SOCKET", raising=False)
    # Nor their language: the tests read English unless a test chooses another.
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if i18n.language_of(os.environ.get(name) or "en") not in (None, "en"):
            monkeypatch.setenv(name, "C.UTF-8")
    i18n.reset()
    yield home
    i18n.reset()


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


def _port_range() -> range:
    """Ports the kernel never hands out to a socket bound to port 0 (below, or else
    above, its ephemeral range)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low, high = map(int, text.split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(10000, low) if low > 12000 else range(high + 1, 65536)


_PORT_LOCKS = Path(tempfile.gettempdir()) / f"gputui-test-ports-{os.getuid()}"
_held_ports: list[int] = []
"""The lock files' descriptors of the ports this process was given (kept open: the
kernel lets the locks go when the process ends, however it ends)."""


def unused_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on, that no other test process on this
    machine (another xdist worker, another run) is given while this one lives, and
    that no socket bound to port 0 takes meanwhile: each port is claimed by an
    exclusive lock on a file named for it, from outside the kernel's ephemeral range.
    Never the same port twice in one process (a second lock on it fails)."""
    _PORT_LOCKS.mkdir(mode=0o700, exist_ok=True)
    ports = _port_range()
    start = random.randrange(len(ports))
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        fd = os.open(_PORT_LOCKS / str(port), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
        except OSError:
            os.close(fd)
            continue
        _held_ports.append(fd)
        return port
    raise AssertionError(f"no free port left in {ports}")


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
def chinese(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test reads gputui in Chinese, as a user whose LANG says zh_CN does."""
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    i18n.reset()
    yield
    i18n.reset()


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


class SshAgent:
    """A real ``ssh-agent`` of one test's own, on a socket in its temp directory."""

    def __init__(self, sock: Path, pid: int) -> None:
        self.sock = sock
        self.pid = pid

    def add(self, key_path: Path, passphrase: str = "") -> None:
        """``ssh-add key_path``; the passphrase comes from an SSH_ASKPASS script."""
        askpass = key_path.parent / f"{key_path.name}.askpass"
        askpass.write_text(f"#!/bin/sh\necho '{passphrase}'\n")
        askpass.chmod(0o700)
        env = {
            "SSH_AUTH_SOCK": str(self.sock),
            "SSH_ASKPASS": str(askpass),
            "SSH_ASKPASS_REQUIRE": "force",
            "DISPLAY": "none",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        subprocess.run(
            ["ssh-add", str(key_path)],
            env=env,
            check=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture
def ssh_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshAgent]:
    """A started ssh-agent, with SSH_AUTH_SOCK pointing at it for this test only."""
    if shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None:
        pytest.skip("ssh-agent / ssh-add not installed")
    sock = tmp_path / "agent.sock"
    # Without -D the agent forks once its socket listens, and prints its pid.
    done = subprocess.run(
        ["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True, check=True
    )
    match = re.search(r"SSH_AGENT_PID=(\d+)", done.stdout)
    assert match, done.stdout
    agent = SshAgent(sock, int(match.group(1)))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
    try:
        yield agent
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent.pid, signal.SIGTERM)
