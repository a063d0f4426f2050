"""The ciphers a host's connection offers: AES-GCM first unless something chose.

The connector builds asyncssh's options once when there is no ssh_config (AES-GCM
first from the start) and twice when there is one (the file may name ``Ciphers``,
which then stand as written)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncssh
import pytest

from gputui.config.models import Config, HostConfig, SshDefaults
from gputui.fleet.connector import HostConnector
from gputui.fleet.hostkeys import KnownHostsCache
from gputui.fleet.jumps import JumpPool
from gputui.fleet.session import encryption_preference


def _connector(tmp_path: Path, ssh_config: str | None, **extra: object) -> HostConnector:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(tmp_path / "id"))
    known = tmp_path / "known_hosts"
    known.write_text("")
    config_path = None
    if ssh_config is not None:
        config_path = tmp_path / "ssh_config"
        config_path.write_text(ssh_config)
    config = Config(
        hosts=[HostConfig(name="gpu01", address="127.0.0.1", port=2222)],
        defaults=SshDefaults(
            user="alice",
            identity_file=str(tmp_path / "id"),
            known_hosts=str(known),
            ssh_config=str(config_path) if config_path else None,
        ),
    )
    (host,) = config.resolved()
    return HostConnector(
        host,
        gate=asyncio.Semaphore(1),
        known_hosts=KnownHostsCache(None),
        jumps=JumpPool(),
        connect_options=extra,
    )


@pytest.mark.parametrize(
    ("ssh_config", "first"),
    [
        (None, "aes128-gcm@openssh.com"),
        ("Host *\n  ServerAliveInterval 5\n", "aes128-gcm@openssh.com"),
        ("Host *\n  Ciphers aes256-ctr,aes128-ctr\n", "aes256-ctr"),
    ],
)
async def test_aes_gcm_is_offered_first_unless_ssh_config_names_ciphers(
    tmp_path: Path, ssh_config: str | None, first: str
) -> None:
    options = await _connector(tmp_path, ssh_config)._options("127.0.0.1", 2222, "alice", [])
    offered = [a.decode() for a in options.encryption_algs]
    assert offered[0] == first
    if first.endswith("gcm@openssh.com"):
        assert offered == encryption_preference()  # every default still allowed


async def test_ciphers_the_caller_chose_stand(tmp_path: Path) -> None:
    connector = _connector(tmp_path, None, encryption_algs=["chacha20-poly1305@openssh.com"])
    options = await connector._options("127.0.0.1", 2222, "alice", [])
    assert [a.decode() for a in options.encryption_algs] == ["chacha20-poly1305@openssh.com"]
