"""What real teams' SSH set-ups go wrong with, said as such: a refusal behind a bastion,
too many agent keys, an encrypted key no agent holds, files hosts.yaml names that are
missing, a ProxyJump that only ~/.ssh/config knows."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputui.config.models import Config, ResolvedHost
from gputui.fleet.backoff import LinkTiming
from gputui.fleet.connector import configured_jump
from gputui.fleet.failures import (
    HelperFailure,
    TunnelFailure,
    classify,
    helper_channel_failure,
)
from gputui.fleet.identity import load_identity, openssh_public_key
from gputui.telemetry import HostStatus


def classified(exc: BaseException) -> Any:
    return classify(exc, user="alice", address="10.0.0.7", timeout=10)


# -- classification -----------------------------------------------------------------


def test_a_refused_forward_behind_a_bastion_is_a_fast_connection_failure() -> None:
    refused = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Connection refused")
    failure = classified(TunnelFailure("ops@bastion:2222", refused))
    assert failure.status is HostStatus.UNREACHABLE
    assert failure.message == "via bastion ops@bastion:2222: connection refused"
    assert not failure.slow_retry and failure.refused


def test_an_unroutable_host_behind_a_bastion_is_unreachable_not_refused() -> None:
    no_route = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "No route to host")
    failure = classified(TunnelFailure("bastion", no_route))
    assert (failure.status, failure.message) == (
        HostStatus.UNREACHABLE,
        "via bastion bastion: no route to host",
    )
    assert not failure.slow_retry and not failure.refused


def test_a_bastion_that_forbids_forwarding_is_its_policy_retried_slowly() -> None:
    prohibited = asyncssh.ChannelOpenError(
        asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "administratively prohibited: open failed"
    )
    failure = classified(TunnelFailure("bastion", prohibited))
    assert failure.status is HostStatus.UNREACHABLE and failure.slow_retry
    assert failure.message.startswith("via bastion bastion: forwarding to 10.0.0.7 refused")


def test_the_helpers_channel_refused_is_a_helper_error() -> None:
    exc = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "open failed")
    wrapped = helper_channel_failure(exc)
    assert isinstance(wrapped, HelperFailure)
    failure = classified(wrapped)
    assert failure.status is HostStatus.HELPER_ERROR and failure.slow_retry
    assert failure.message == "could not start the helper: open failed"


def test_an_unwrapped_channel_refusal_is_not_blamed_on_the_helper() -> None:
    failure = classified(asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "nope"))
    assert failure.status is HostStatus.UNREACHABLE and not failure.slow_retry


@pytest.mark.parametrize(
    "exc",
    [
        asyncssh.DisconnectError(asyncssh.DISC_PROTOCOL_ERROR, "Too many authentication failures"),
        asyncssh.DisconnectError(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "bye"),
    ],
    ids=["openssh-text", "code"],
)
def test_too_many_authentication_failures_is_auth_and_suggests_identities_only(
    exc: asyncssh.DisconnectError,
) -> None:
    failure = classified(exc)
    assert failure.status is HostStatus.AUTH_FAILED and failure.slow_retry
    assert "too many authentication failures for alice@10.0.0.7" in failure.message
    assert "IdentitiesOnly yes" in failure.message


def test_other_disconnects_stay_unreachable() -> None:
    failure = classified(asyncssh.DisconnectError(asyncssh.DISC_BY_APPLICATION, "bye"))
    assert failure.status is HostStatus.UNREACHABLE


def test_a_refused_direct_connection_retries_on_the_refused_cap() -> None:
    failure = classified(ConnectionRefusedError(111, "Connection refused"))
    assert failure.refused and failure.message == "connection refused"
    assert not classified(TimeoutError()).refused


def test_the_refused_cap_bounds_the_backoff() -> None:
    from gputui.fleet.backoff import Backoff

    backoff = Backoff(1.0, 60.0)
    backoff.attempt = 10
    assert all(backoff.next_delay(LinkTiming().refused_cap) <= 2.0 for _ in range(200))


# -- identity files -----------------------------------------------------------------


def keygen(path: Path, passphrase: str = "", kind: str = "ed25519") -> asyncssh.SSHKey:
    """A key made by OpenSSH's own ssh-keygen; its public half (the .pub is removed)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", "test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    pub = Path(f"{path}.pub")
    public = asyncssh.read_public_key(pub)
    pub.unlink()
    return public


@pytest.fixture
def encrypted_key(tmp_path: Path) -> tuple[asyncssh.SSHKey, Path]:
    path = tmp_path / "id_locked"
    return keygen(path, "s3cret"), path


def test_an_encrypted_key_shows_its_public_half_without_a_pub_file(
    encrypted_key: tuple[asyncssh.SSHKey, Path],
) -> None:
    key, path = encrypted_key
    identity = load_identity(str(path))
    assert identity.encrypted
    assert identity.public is not None
    assert identity.public.public_data == key.public_data
    assert openssh_public_key(b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END") is None


def test_a_pub_file_next_to_a_pem_key_gives_its_public_half(tmp_path: Path) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_pem"
    key.write_private_key(str(path), format_name="pkcs8-pem", passphrase="x")
    assert load_identity(str(path)).public is None
    key.write_public_key(f"{path}.pub")
    identity = load_identity(str(path))
    assert identity.encrypted and identity.public is not None
    assert identity.public.public_data == key.public_data


def test_an_identity_is_read_again_only_when_its_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputui.fleet import identity as identity_module

    reads: list[str] = []
    real = identity_module.read_regular_file

    def counted(path: str | Path, limit: int) -> bytes:
        reads.append(str(path))
        return real(path, limit)

    monkeypatch.setattr(identity_module, "read_regular_file", counted)
    path = tmp_path / "id_plain"
    first = asyncssh.generate_private_key("ssh-ed25519")
    first.write_private_key(str(path))
    one = load_identity(str(path))
    assert load_identity(str(path)) is one and len(reads) == 1  # every attempt after: no I/O
    # The key as asyncssh loads it, kept: a connection is offered it and parses no file.
    assert [k.public_data for k in one.keypairs] == [first.public_data]
    second = asyncssh.generate_private_key("ssh-ed25519")
    second.write_private_key(str(tmp_path / "new"))
    os.replace(tmp_path / "new", path)  # as editors and ssh-keygen -f do: a new file
    again = load_identity(str(path))
    assert again.public is not None and again.public.public_data == second.public_data
    assert [k.public_data for k in again.keypairs] == [second.public_data]
    assert len(reads) == 2


# -- the whole path, against in-process servers -------------------------------------


async def settled(kit: Any, fleet: Any, name: str, status: HostStatus) -> Any:
    return await kit.wait_for(
        lambda: (s := kit.snap(fleet, name)).status is status and s,
        what=f"{name} {status.value}: {kit.snap(fleet, name).message}",
    )


async def test_an_encrypted_identity_file_in_the_agent_connects(
    kit, encrypted_key, ssh_agent
) -> None:
    key, path = encrypted_key
    server = await kit.servers.start(authorized_key=key)
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}])
    config = with_identity(config, path)
    ssh_agent.add(path, "s3cret")
    fleet = await kit.start_fleet(config)
    await settled(kit, fleet, "h1", HostStatus.LIVE)


async def test_an_encrypted_identity_file_no_agent_holds_names_the_key(
    kit, encrypted_key, ssh_agent
) -> None:
    key, path = encrypted_key
    server = await kit.servers.start(authorized_key=key)
    kit.known_hosts(server)
    other = kit.tmp_path / "other_key"
    keygen(other)
    ssh_agent.add(other)  # an agent, but not holding this key
    config = with_identity(kit.config([{"name": "h1", "port": server.port}]), path)
    fleet = await kit.start_fleet(config)
    snap = await settled(kit, fleet, "h1", HostStatus.AUTH_FAILED)
    assert snap.message == (
        f"identity file {path} is encrypted and no ssh-agent holds it: run ssh-add {path}"
    )


async def test_an_encrypted_identity_file_without_an_agent_says_so_before_connecting(
    kit, encrypted_key
) -> None:
    _, path = encrypted_key
    port = kit.free_port()  # nothing listens: the hint comes before any connection
    kit.known_hosts()
    config = with_identity(kit.config([{"name": "h1", "port": port}]), path)
    fleet = await kit.start_fleet(config)
    snap = await settled(kit, fleet, "h1", HostStatus.AUTH_FAILED)
    assert snap.message.startswith(f"identity file {path} is encrypted and no ssh-agent")
    assert snap.message.endswith(f"run ssh-add {path}")


@pytest.mark.parametrize("field", ["identity_file", "known_hosts"])
@pytest.mark.parametrize("problem", ["missing", "directory", "fifo"])
async def test_a_file_hosts_yaml_names_that_cannot_be_read_is_named_with_its_field(
    kit, field: str, problem: str
) -> None:
    """A FIFO is refused without opening it for good: that would block the event loop
    (every host and the console with it) until something wrote to it."""
    server = await kit.servers.start()
    kit.known_hosts(server)
    bad = kit.tmp_path / f"bad_{field}"
    if problem == "directory":
        bad.mkdir()
    elif problem == "fifo":
        os.mkfifo(bad)
    config = kit.config([{"name": "h1", "port": server.port, field: str(bad)}])
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status.is_problem and s, what="refused"
    )
    reason = {
        "missing": "no such file or directory",
        "directory": "is a directory",
        "fifo": "not a regular file (a fifo or device)",
    }[problem]
    assert snap.message == f"cannot read {bad} (hosts.yaml {field}): {reason}"
    expected = HostStatus.AUTH_FAILED if field == "identity_file" else HostStatus.HOST_KEY_UNKNOWN
    assert snap.status is expected
    assert snap.next_retry_at is not None
    assert not server.command_pids()


def with_identity(config: Config, path: Path) -> Config:
    defaults = config.defaults.model_copy(update={"identity_file": str(path)})
    return config.model_copy(update={"defaults": defaults})


# -- check-config's VIA column ------------------------------------------------------


def resolved(config: Config) -> list[ResolvedHost]:
    return config.resolved()


def test_configured_jump_reads_ssh_config_and_never_connects(kit) -> None:
    ssh_config = kit.tmp_path / "ssh_config"
    ssh_config.write_text(
        "Host 10.1.*\n    ProxyJump ops@bastion.example.org:2222\n"
        "Host 10.2.0.1\n    ProxyJump none\n"
        "Host evil\n    ProxyJump jump\x1b[31mred\n"
    )
    config = kit.config(
        [
            {"name": "a", "address": "10.1.0.5"},
            {"name": "b", "address": "10.2.0.1"},
            {"name": "c", "address": "10.1.0.6", "proxy_jump": "own@jump"},
            {"name": "d", "address": "evil"},
        ]
    )
    defaults = config.defaults.model_copy(update={"ssh_config": str(ssh_config)})
    hosts = resolved(config.model_copy(update={"defaults": defaults}))
    vias = [configured_jump(h) for h in hosts]
    assert vias[:3] == ["ops@bastion.example.org:2222", None, "own@jump"]
    assert vias[3] is not None and "\x1b" not in vias[3]
    # Off, the file is not read.
    assert configured_jump(kit.config([{"name": "a", "address": "10.1.0.5"}]).resolved()[0]) is None


def test_check_config_via_column_shows_a_proxy_jump_from_ssh_config(kit) -> None:
    from gputui.cli.check_config import summarise

    ssh_config = Path.home() / ".ssh" / "config"  # the default setting's file
    ssh_config.parent.mkdir(exist_ok=True)
    ssh_config.write_text("Host gpu-behind.invalid\n    ProxyJump ops@jump.invalid:2222\n")
    config = kit.config(
        [
            {"name": "behind", "address": "gpu-behind.invalid"},
            {"name": "direct", "address": "gpu-direct.invalid"},
        ]
    )
    defaults = config.defaults.model_copy(update={"ssh_config": "~/.ssh/config"})
    text = summarise(config.model_copy(update={"defaults": defaults}), Path("hosts.yaml"))
    rows = {line.split()[0]: line.split() for line in text.splitlines()[-2:]}
    assert rows["behind"][3] == "ops@jump.invalid:2222"
    assert rows["direct"][3] == "-"


@pytest.mark.parametrize(
    ("value", "applied"),
    [
        ({"seconds": 2}, 2.0),
        ({"seconds": 0.5}, 0.5),
        ({"seconds": float("nan")}, None),
        ({"seconds": 1e308}, None),
        ({"seconds": -3}, None),
        ({"seconds": True}, None),
        ({"seconds": "2"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_only_a_sane_applied_interval_is_read_as_one(
    value: dict[str, object] | None, applied: float | None
) -> None:
    """The link's stale and hung limits follow what the helper applied only when that is
    0.1-60 s (NaN or 1e308 would switch the watchdog off); anything else is a bad result."""
    from gputui.wire.messages import IntervalRequest, ResultError

    request = IntervalRequest(seconds=1.0)
    if applied is None:
        with pytest.raises(ResultError):
            request.decode(value)
    else:
        assert request.decode(value).seconds == applied
