"""Everything that can go wrong with a host shows as a status and one plain line."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re

import asyncssh
import pytest

from gputui.fleet.hostkeys import fingerprint
from gputui.remote import HELPER_VERSION
from gputui.telemetry import HostStatus
from gputui.wire.messages import PROTOCOL_VERSION, ProcessSample

FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


async def test_changed_host_key_is_refused_with_both_fingerprints(kit) -> None:
    server = await kit.servers.start()
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    public = impostor.export_public_key().decode().strip()
    known = kit.tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{server.port} {public}\n")
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port}]))

    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HOST_KEY_CHANGED and s,
        what="host key changed",
    )
    found = FINGERPRINT.findall(snap.message)
    assert fingerprint(server.host_key) in found
    assert fingerprint(impostor) in found
    assert str(known) in snap.message
    assert snap.next_retry_at is not None
    assert fleet.samples_received()["h1"] == 0


async def test_hashed_known_hosts_entry_is_honoured(kit) -> None:
    server = await kit.servers.start()
    # What `ssh-keygen -H` writes: |1|salt|hmac of "[127.0.0.1]:PORT".
    salt = os.urandom(20)
    name = f"[127.0.0.1]:{server.port}".encode()
    digest = hmac.new(salt, name, hashlib.sha1).digest()
    public = server.host_key.export_public_key().decode().strip()
    hashed = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    (kit.tmp_path / "known_hosts").write_text(f"{hashed} {public}\n")
    config = kit.config([{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}])
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.LIVE, what="live")


async def test_unknown_host_key_is_refused_with_its_fingerprint(kit) -> None:
    server = await kit.servers.start()
    other = await kit.servers.start()
    kit.known_hosts(other)  # knows another port only
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port}]))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HOST_KEY_UNKNOWN and s,
        what="host key unknown",
    )
    assert FINGERPRINT.findall(snap.message) == [fingerprint(server.host_key)]
    assert "known_hosts" in snap.message


async def test_wrong_client_key_is_auth_failed(kit) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    server = await kit.servers.start(authorized_key=stranger)
    kit.known_hosts(server)
    fleet = await kit.start_fleet(kit.config([{"name": "h1", "port": server.port}]))
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.AUTH_FAILED and s,
        what="auth failed",
    )
    assert snap.message.startswith("permission denied (publickey) for ")
    assert snap.message.endswith("@127.0.0.1")


async def test_unreachable_host_while_another_stays_live(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config(
        [
            {"name": "up", "port": server.port, "sim": "2xa100-40gb,name=up"},
            {"name": "down", "port": kit.free_port()},
        ]
    )
    fleet = await kit.start_fleet(config)
    down = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "down")).status is HostStatus.UNREACHABLE and s,
        what="unreachable",
    )
    assert down.message == "connection refused"
    assert down.next_retry_at is not None
    await kit.wait_for(lambda: fleet.samples_received()["up"] >= 3, what="samples from up")
    assert kit.snap(fleet, "up").status is HostStatus.LIVE
    assert list(fleet.snapshots()) == ["up", "down"]
    offline = await fleet.signal_process("down", "GPU-x", ProcessSample(pid=1234), "TERM")
    assert not offline.ok and offline.message.startswith("down is not connected (")


GARBAGE = {
    "junk": (
        "sys.stdout.write('Traceback (most recent call last):\\n  oops\\n'); "
        "sys.stderr.write('boom\\n'); sys.exit(1)",
        "not the gputui protocol",
    ),
    "binary": (
        "sys.stdout.buffer.write(bytes(range(256)) * 4 + b'\\n'); sys.stdout.flush()",
        "not the gputui protocol",
    ),
    "silent_exit": ("sys.stderr.write('helper blew up: no module x\\n'); sys.exit(3)", "status 3"),
    "flood": (
        "sys.stdout.buffer.write(b'x' * (5 * 1024 * 1024)); sys.stdout.flush()",
        "over 4194304 bytes",
    ),
    "old_version": (
        "print("
        + repr(
            json.dumps({"type": "hello", "protocol": 99, "helper_version": "9.9", "hostname": "x"})
        )
        + ", flush=True); sys.stdin.read()",
        f"protocol 99 (helper 9.9); this console needs protocol {PROTOCOL_VERSION} "
        f"(helper {HELPER_VERSION})",
    ),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
async def test_helper_that_misbehaves_is_a_helper_error(kit, case: str) -> None:
    body, expected = GARBAGE[case]
    server = await kit.servers.start()
    kit.known_hosts(server)
    python = kit.fake_python(f"python-{case}", body)
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HELPER_ERROR and s,
        what="helper error",
    )
    assert expected in snap.message
    assert "\n" not in snap.message and len(snap.message) < 400
    if case == "junk":
        assert "Traceback" in snap.message and "stderr: boom" in snap.message
    if case == "silent_exit":
        assert snap.message.endswith("helper blew up: no module x")


async def test_missing_python_says_so(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "python": "/nonexistent/python3"}])
    fleet = await kit.start_fleet(config)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HELPER_ERROR and s,
        what="helper error",
    )
    assert "status 127" in snap.message
    assert "/nonexistent/python3" in snap.message and "not found" in snap.message


async def test_nvml_failure_in_hello_is_an_nvml_error(kit) -> None:
    hello = {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "helper_version": HELPER_VERSION,
        "hostname": "h1",
        "errors": {"nvml": "LibraryNotFound: no libnvidia-ml.so.1"},
    }
    python = kit.fake_python("python-nvml", f"print({json.dumps(hello)!r}, flush=True)")
    server = await kit.servers.start()
    kit.known_hosts(server)
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.NVML_ERROR and s,
        what="nvml error",
    )
    assert "LibraryNotFound" in snap.message
    assert snap.hello is not None and snap.hello.hostname == "h1"
