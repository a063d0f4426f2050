"""Hosts behind a bastion share one connection to it, and its host key is verified."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.fleet.hostkeys import fingerprint
from gputui.fleet.jumps import JumpPool
from gputui.telemetry import HostStatus

FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
HOSTS = 6


def established_to(port: int) -> int:
    """TCP connections to 127.0.0.1:``port`` now established (server side, from /proc)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01":  # 01: ESTABLISHED
                count += 1
    return count


def all_live(fleet: Fleet) -> bool:
    return all(
        s.status is HostStatus.LIVE and s.sample is not None for s in fleet.snapshots().values()
    )


async def bastion_and_targets(kit: Any, count: int = HOSTS) -> tuple[Any, list[Any]]:
    bastion = await kit.servers.start(allow_forwarding=True)
    targets = [await kit.servers.start() for _ in range(count)]
    return bastion, targets


def with_ssh_config(config: Config, path: Path) -> Config:
    defaults = config.defaults.model_copy(update={"ssh_config": str(path)})
    return config.model_copy(update={"defaults": defaults})


async def test_hosts_behind_a_bastion_share_one_connection_to_it(kit) -> None:
    bastion, targets = await bastion_and_targets(kit)
    kit.known_hosts(bastion, *targets)
    jump = f"{kit.config([]).defaults.user}@127.0.0.1:{bastion.port}"
    config = kit.config(
        [
            {"name": f"in{i}", "port": t.port, "sim": f"1xa10,name=in{i}", "proxy_jump": jump}
            for i, t in enumerate(targets)
        ]
    )
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: all_live(fleet), what="every host behind the bastion live")
    assert established_to(bastion.port) == 1
    assert fleet.jumps.opened == 1 and fleet.jumps.open_count() == 1
    assert not bastion.command_pids()  # the bastion only forwards

    # The bastion goes away: every host drops, and one new connection serves them all.
    await bastion.stop()
    await kit.wait_for(
        lambda: all(s.status is not HostStatus.LIVE for s in fleet.snapshots().values()),
        what="hosts down with their bastion",
    )
    await bastion.start()
    await kit.wait_for(lambda: all_live(fleet), what="every host live again")
    assert established_to(bastion.port) == 1
    assert fleet.jumps.opened == 2

    await fleet.close()
    await kit.wait_for(lambda: established_to(bastion.port) == 0, what="bastion released")


async def test_handshakes_through_a_bastion_are_bounded(
    kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    bastion, targets = await bastion_and_targets(kit)
    kit.known_hosts(bastion, *targets)
    jump = f"127.0.0.1:{bastion.port}"
    config = kit.config(
        [
            {"name": f"in{i}", "port": t.port, "sim": f"1xa10,name=in{i}", "proxy_jump": jump}
            for i, t in enumerate(targets)
        ]
    )
    real_connect = asyncssh.connect
    in_flight = peak = 0

    async def counting_connect(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, peak
        through_bastion = isinstance(kwargs.get("tunnel"), asyncssh.SSHClientConnection)
        if through_bastion:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            return await real_connect(*args, **kwargs)
        finally:
            if through_bastion:
                in_flight -= 1

    monkeypatch.setattr(asyncssh, "connect", counting_connect)
    fleet = Fleet(config, timing=kit.fast_timing)
    fleet.jumps = JumpPool(handshakes=2)
    try:
        await fleet.start()
        await kit.wait_for(lambda: all_live(fleet), what="every host live")
    finally:
        await fleet.close()
    assert peak == 2


async def test_a_proxy_jump_from_ssh_config_is_verified_and_shared(kit) -> None:
    bastion, targets = await bastion_and_targets(kit, 3)
    kit.known_hosts(bastion, *targets)
    ssh_config = kit.tmp_path / "ssh_config"
    ssh_config.write_text(f"Host 127.0.0.1\n    ProxyJump 127.0.0.1:{bastion.port}\n")
    config = kit.config(
        [
            {"name": f"in{i}", "port": t.port, "sim": f"1xa10,name=in{i}"}
            for i, t in enumerate(targets)
        ]
    )
    fleet = await kit.start_fleet(with_ssh_config(config, ssh_config))
    await kit.wait_for(lambda: all_live(fleet), what="every host live through ssh_config's jump")
    assert established_to(bastion.port) == 1  # the bastion's own ProxyJump is not followed
    assert not bastion.command_pids()


async def test_an_unknown_bastion_key_from_ssh_config_is_refused_with_its_fingerprint(
    kit,
) -> None:
    bastion, targets = await bastion_and_targets(kit, 1)
    known = kit.known_hosts(*targets)  # the target only: the bastion's key is unknown
    ssh_config = kit.tmp_path / "ssh_config"
    ssh_config.write_text(f"Host 127.0.0.1\n    ProxyJump 127.0.0.1:{bastion.port}\n")
    config = kit.config([{"name": "in0", "port": targets[0].port, "sim": "1xa10,name=in0"}])
    fleet = await kit.start_fleet(with_ssh_config(config, ssh_config))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "in0")).status is HostStatus.HOST_KEY_UNKNOWN and s,
        what="bastion key unknown",
    )
    assert snap.message.startswith(f"bastion 127.0.0.1:{bastion.port}: unknown host key")
    assert FINGERPRINT.findall(snap.message) == [fingerprint(bastion.host_key)]
    assert str(known) in snap.message
    assert established_to(targets[0].port) == 0


async def test_a_changed_bastion_key_names_both_fingerprints(kit) -> None:
    bastion, targets = await bastion_and_targets(kit, 1)
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    public = impostor.export_public_key().decode().strip()
    known = kit.known_hosts(*targets)
    with known.open("a") as fh:
        fh.write(f"[127.0.0.1]:{bastion.port} {public}\n")
    config = kit.config(
        [
            {
                "name": "in0",
                "port": targets[0].port,
                "proxy_jump": f"127.0.0.1:{bastion.port}",
            }
        ]
    )
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "in0")).status is HostStatus.HOST_KEY_CHANGED and s,
        what="bastion key changed",
    )
    assert snap.message.startswith(f"bastion 127.0.0.1:{bastion.port}: HOST KEY CHANGED")
    assert set(FINGERPRINT.findall(snap.message)) == {
        fingerprint(bastion.host_key),
        fingerprint(impostor),
    }


async def test_a_refusal_without_a_verdict_is_not_called_a_changed_key(kit) -> None:
    server = await kit.servers.start()
    public = server.host_key.export_public_key().decode().strip()
    (kit.tmp_path / "known_hosts").write_text(f"@revoked * {public}\n")
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port}]))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status.is_problem and s, what="refused"
    )
    assert snap.status is HostStatus.HOST_KEY_UNKNOWN
    assert "CHANGED" not in snap.message.upper()
    assert snap.message.startswith("host key of 127.0.0.1 not accepted: ")
    assert "revoked" in snap.message
