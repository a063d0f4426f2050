"""Fixtures for fleet tests: real in-process SSH servers on port 0, real helpers.

Nothing about SSH is mocked: the fleet connects over TCP to ``SimSshServer``,
verifies its host key against a known_hosts file, authenticates with a key, and
runs the real helper (in sim mode) as a subprocess.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputui.config.loader import parse_config
from gputui.config.models import Config
from gputui.demo.server import SimSshServer
from gputui.fleet.backoff import LinkTiming
from gputui.fleet.fleet import Fleet
from gputui.telemetry import HostSnapshot

# wait, free_port, fast_timing and fleets come from tests/conftest.py.
WaitFor = Callable[..., Awaitable[Any]]


@pytest.fixture
def client_key(tmp_path: Path) -> tuple[asyncssh.SSHKey, Path]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_ed25519"
    key.write_private_key(str(path))
    path.chmod(0o600)
    return key, path


@pytest.fixture
async def servers(client_key: tuple[asyncssh.SSHKey, Path]) -> AsyncIterator[ServerPool]:
    pool = ServerPool(client_key[0])
    yield pool
    await pool.stop_all()


class ServerPool:
    """Starts ``SimSshServer`` instances and stops them all at teardown."""

    def __init__(self, key: asyncssh.SSHKey) -> None:
        self.key = key
        self.servers: list[SimSshServer] = []

    async def start(self, **kwargs: Any) -> SimSshServer:
        server = SimSshServer(kwargs.pop("authorized_key", self.key), **kwargs)
        await server.start()
        self.servers.append(server)
        return server

    async def stop_all(self) -> None:
        for server in self.servers:
            await server.stop()


def write_known_hosts(path: Path, *servers: SimSshServer) -> Path:
    path.write_text("".join(s.known_hosts_line for s in servers))
    return path


def make_config(
    tmp_path: Path,
    key_path: Path,
    hosts: list[dict[str, Any]],
    *,
    known_hosts: Path | None = None,
    **top: Any,
) -> Config:
    """A Config for ``hosts`` on 127.0.0.1, through the real parser."""
    data: dict[str, Any] = {
        "defaults": {
            "user": getpass.getuser(),
            "identity_file": str(key_path),
            "known_hosts": str(known_hosts or tmp_path / "known_hosts"),
            "ssh_config": None,
            "python": sys.executable,
            "connect_timeout": 5,
        },
        "refresh_interval": 0.2,
        "hosts": [{"address": "127.0.0.1", **h} for h in hosts],
    }
    data.update(top)
    return parse_config(json.dumps(data), "test-config")


def snap(fleet: Fleet, host: str) -> HostSnapshot:
    return fleet.snapshots()[host]


def fake_python(tmp_path: Path, name: str, body: str) -> str:
    """An executable that stands in for ``python3`` and misbehaves as ``body`` says."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport os, sys\n{body}\n")
    path.chmod(0o755)
    return str(path)


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


class Kit:
    """Everything a fleet test needs, as one fixture."""

    def __init__(
        self,
        tmp_path: Path,
        key: tuple[asyncssh.SSHKey, Path],
        servers: ServerPool,
        fleets: Callable[..., Awaitable[Fleet]],
        wait: WaitFor,
        free_port: Callable[[], int],
        fast_timing: LinkTiming,
    ) -> None:
        self.tmp_path = tmp_path
        self.key, self.key_path = key
        self.servers = servers
        self.start_fleet = fleets
        self.wait_for = wait
        self.free_port = free_port
        self.fast_timing = fast_timing
        self.snap = snap
        self.alive = process_alive

    def config(self, hosts: list[dict[str, Any]], **kwargs: Any) -> Config:
        return make_config(self.tmp_path, self.key_path, hosts, **kwargs)

    def known_hosts(self, *servers: SimSshServer, name: str = "known_hosts") -> Path:
        return write_known_hosts(self.tmp_path / name, *servers)

    def fake_python(self, name: str, body: str) -> str:
        return fake_python(self.tmp_path, name, body)


@pytest.fixture
def kit(
    tmp_path: Path,
    client_key: tuple[asyncssh.SSHKey, Path],
    servers: ServerPool,
    fleets: Callable[..., Awaitable[Fleet]],
    wait: WaitFor,
    free_port: Callable[[], int],
    fast_timing: LinkTiming,
) -> Kit:
    return Kit(tmp_path, client_key, servers, fleets, wait, free_port, fast_timing)
