"""~/.ssh/config is honoured: HostName, Port, User and IdentityFile come from it."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.config.loader import parse_config
from gputui.config.models import Config
from gputui.telemetry import HostStatus

ALIAS = "gpu-alias.invalid"
"""Only ssh_config knows this name: ``.invalid`` never resolves (RFC 6761)."""


def write_ssh_config(path: Path, port: int, key_path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"Host {ALIAS}\n"
        "  HostName 127.0.0.1\n"
        f"  Port {port}\n"
        f"  User {getpass.getuser()}\n"
        f"  IdentityFile {key_path}\n"
    )
    return path


def alias_config(known: Path, **defaults: Any) -> Config:
    """Nothing but the name in hosts.yaml: everything else must come from ssh_config."""
    return parse_config(
        json.dumps(
            {
                "defaults": {
                    "known_hosts": str(known),
                    "python": sys.executable,
                    "connect_timeout": 5,
                    **defaults,
                },
                "refresh_interval": 0.2,
                "hosts": [{"name": ALIAS, "sim": "1xa10,name=gpu-alias"}],
            }
        )
    )


async def test_ssh_config_supplies_address_port_user_and_key(kit) -> None:
    server = await kit.servers.start()
    known = kit.known_hosts(server)
    ssh_config = write_ssh_config(kit.tmp_path / "ssh_config", server.port, kit.key_path)
    fleet = await kit.start_fleet(alias_config(known, ssh_config=str(ssh_config)))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, ALIAS)).status is HostStatus.LIVE and s,
        timeout=20,
        what="the host named only in ssh_config to be live",
    )
    assert snap.hello is not None and snap.hello.hostname == "gpu-alias"
    assert [g.name for g in snap.hello.gpus] == ["NVIDIA A10"]


async def test_ssh_config_defaults_to_the_users_own_file(kit) -> None:
    server = await kit.servers.start()
    known = kit.known_hosts(server)
    write_ssh_config(Path.home() / ".ssh" / "config", server.port, kit.key_path)
    fleet = await kit.start_fleet(alias_config(known))  # ssh_config left at its default
    await kit.wait_for(
        lambda: kit.snap(fleet, ALIAS).status is HostStatus.LIVE,
        timeout=20,
        what="the alias to be live through ~/.ssh/config",
    )


@pytest.mark.parametrize("where", ["elsewhere", "default"])
async def test_with_ssh_config_off_the_alias_does_not_resolve(kit, where: str) -> None:
    """The file of the tests above, present but turned off: the alias means nothing."""
    server = await kit.servers.start()
    known = kit.known_hosts(server)
    home_config = Path.home() / ".ssh" / "config"
    path = kit.tmp_path / "ssh_config" if where == "elsewhere" else home_config
    write_ssh_config(path, server.port, kit.key_path)
    fleet = await kit.start_fleet(alias_config(known, ssh_config=None))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, ALIAS)).status is not HostStatus.CONNECTING and s,
        timeout=20,
        what="the first connection attempt to end",
    )
    assert snap.status is HostStatus.UNREACHABLE, snap
    assert snap.hello is None and ALIAS in snap.message, snap.message
