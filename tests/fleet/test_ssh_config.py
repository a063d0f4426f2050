"""~/.ssh/config is honoured: HostName, Port, User and IdentityFile come from it."""

from __future__ import annotations

import getpass
import json
import sys

from gputui.config import parse_config
from gputui.telemetry import HostStatus


async def test_ssh_config_supplies_address_port_user_and_key(kit) -> None:
    server = await kit.servers.start()
    known = kit.known_hosts(server)
    ssh_config = kit.tmp_path / "ssh_config"
    ssh_config.write_text(
        "Host gpu-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {server.port}\n"
        f"  User {getpass.getuser()}\n"
        f"  IdentityFile {kit.key_path}\n"
    )
    # Nothing but the name in hosts.yaml: everything else must come from ssh_config.
    config = parse_config(
        json.dumps(
            {
                "defaults": {
                    "ssh_config": str(ssh_config),
                    "known_hosts": str(known),
                    "python": sys.executable,
                    "connect_timeout": 5,
                },
                "refresh_interval": 0.2,
                "hosts": [{"name": "gpu-alias", "sim": "1xa10,name=gpu-alias"}],
            }
        )
    )
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "gpu-alias")).status is HostStatus.LIVE and s,
        timeout=20,
        what="the host named only in ssh_config to be live",
    )
    assert snap.hello is not None and snap.hello.hostname == "gpu-alias"
    assert [g.name for g in snap.hello.gpus] == ["NVIDIA A10"]


async def test_without_ssh_config_the_alias_does_not_resolve(kit) -> None:
    """The same host with ssh_config off fails: the test above proves the file was used."""
    server = await kit.servers.start()
    known = kit.known_hosts(server)
    config = parse_config(
        json.dumps(
            {
                "defaults": {
                    "ssh_config": None,
                    "known_hosts": str(known),
                    "python": sys.executable,
                    "connect_timeout": 2,
                },
                "hosts": [{"name": "gpu-alias.invalid", "sim": "1xa10"}],
            }
        )
    )
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "gpu-alias.invalid")).status is HostStatus.UNREACHABLE and s,
        timeout=20,
        what="the unresolvable host to be unreachable",
    )
    assert snap.message
