"""Host keys are checked against the user's and the system-wide known_hosts files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import asyncssh

from gputui.config.models import Config
from gputui.fleet.hostkeys import KnownHostsCache, fingerprint
from gputui.telemetry import HostStatus

FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def without_known_hosts(config: Config) -> Config:
    """hosts.yaml that sets no known_hosts file (OpenSSH's defaults apply)."""
    defaults = config.defaults.model_copy(update={"known_hosts": None})
    return config.model_copy(update={"defaults": defaults})


def status_is(kit: Any, fleet: Any, status: HostStatus) -> Any:
    return lambda: (s := kit.snap(fleet, "h1")).status is status and s


async def test_a_key_in_the_global_file_is_trusted(kit, isolated_home: Path) -> None:
    server = await kit.servers.start()
    global_file = kit.known_hosts(server, name="ssh_known_hosts")
    assert not (isolated_home / ".ssh" / "known_hosts").exists()
    config = without_known_hosts(kit.config([{"name": "h1", "port": server.port, "sim": "1xa10"}]))
    fleet = await kit.start_fleet(config, global_known_hosts=str(global_file))
    await kit.wait_for(status_is(kit, fleet, HostStatus.LIVE), what="live via the global file")


async def test_without_either_file_the_key_is_unknown_and_goes_to_the_user_file(
    kit, isolated_home: Path
) -> None:
    server = await kit.servers.start()
    config = without_known_hosts(kit.config([{"name": "h1", "port": server.port}]))
    missing = kit.tmp_path / "no_such_global_file"
    fleet = await kit.start_fleet(config, global_known_hosts=str(missing))
    snap = await kit.wait_for(status_is(kit, fleet, HostStatus.HOST_KEY_UNKNOWN), what="unknown")
    assert snap.message.endswith(f"add it to {isolated_home / '.ssh' / 'known_hosts'}")


async def test_a_changed_key_names_the_files_that_expect_another(kit, isolated_home: Path) -> None:
    server = await kit.servers.start()
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    line = f"[127.0.0.1]:{server.port} {impostor.export_public_key().decode().strip()}\n"
    global_file = kit.tmp_path / "ssh_known_hosts"
    global_file.write_text(line)
    user_file = isolated_home / ".ssh" / "known_hosts"
    user_file.parent.mkdir()
    user_file.write_text("# nothing here yet\n")
    config = without_known_hosts(kit.config([{"name": "h1", "port": server.port}]))
    fleet = await kit.start_fleet(config, global_known_hosts=str(global_file))
    snap = await kit.wait_for(status_is(kit, fleet, HostStatus.HOST_KEY_CHANGED), what="changed")
    assert f"{user_file} and {global_file} expect" in snap.message
    assert set(FINGERPRINT.findall(snap.message)) == {
        fingerprint(server.host_key),
        fingerprint(impostor),
    }


async def test_a_file_set_in_hosts_yaml_is_used_alone(kit) -> None:
    server = await kit.servers.start()
    global_file = kit.known_hosts(server, name="ssh_known_hosts")
    explicit = kit.tmp_path / "known_hosts"
    explicit.write_text("")
    config = kit.config([{"name": "h1", "port": server.port}], known_hosts=explicit)
    fleet = await kit.start_fleet(config, global_known_hosts=str(global_file))
    snap = await kit.wait_for(status_is(kit, fleet, HostStatus.HOST_KEY_UNKNOWN), what="unknown")
    assert snap.message.endswith(f"add it to {explicit}")


def test_a_corrupt_file_does_not_spoil_the_other(tmp_path: Path, isolated_home: Path) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    global_file = tmp_path / "ssh_known_hosts"
    global_file.write_text(f"gpu01 {key.export_public_key().decode().strip()}\n")
    user_file = isolated_home / ".ssh" / "known_hosts"
    user_file.parent.mkdir()
    user_file.write_text("gpu02 ssh-ed25519 not-base64!!\n")
    cache = KnownHostsCache(str(global_file))
    loaded = cache.load(None)
    assert loaded.files == (str(user_file), str(global_file))
    assert [fingerprint(k) for k in loaded.entries.match("gpu01", "", 22)[0]] == [fingerprint(key)]
    assert cache.load(None) is loaded  # unchanged files are not read again
    assert KnownHostsCache(None).load(None).files == (str(user_file),)
