"""The ``identity_file`` hosts.yaml names, used the way ``ssh -i`` uses it.

OpenSSH offers the agent's copy of an ``-i`` key (the agent holds it decrypted) and
reads the file itself only when it must. So does gputui: the agent is kept, narrowed
to the one key matching the file's public half (the ``.pub`` next to it, or the
public key an OpenSSH-format private key carries in the clear, even encrypted), and
the file is offered itself when it is not encrypted. An encrypted key that no agent
holds is said as such, with the ``ssh-add`` that fixes it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from asyncssh.public_key import decode_ssh_public_key

from gputui.common.text import clean
from gputui.fleet.failures import SetupFailure, unreadable_file
from gputui.fleet.localfiles import read_regular_file
from gputui.telemetry import HostStatus

_OPENSSH_MAGIC = b"openssh-key-v1\0"
_MAX_KEY_FILE = 1 << 20


@dataclass(frozen=True, slots=True)
class Identity:
    """One identity file: where it is, its public half (when known), whether encrypted."""

    setting: str
    """The path as hosts.yaml spells it (for messages)."""
    path: str
    """The path with ``~`` expanded."""
    public: asyncssh.SSHKey | None
    encrypted: bool
    keypairs: tuple[asyncssh.SSHKeyPair, ...] = ()
    """The file's key (with its ``-cert.pub`` certificate, if any) as asyncssh loads
    it, when not encrypted: offered as it is, so a connection parses no file."""

    def agent_hint(self, agent_path: str | None) -> str:
        """Why an encrypted key could not be used, and the command that fixes it."""
        setting = clean(self.setting, 200)
        if not agent_path:
            return (
                f"identity file {setting} is encrypted and no ssh-agent holds it "
                f"(SSH_AUTH_SOCK is not set): start ssh-agent and run ssh-add {setting}"
            )
        return (
            f"identity file {setting} is encrypted and no ssh-agent holds it: run ssh-add {setting}"
        )


_Stamp = tuple[int, int, int, int] | None
_LOADED: dict[str, tuple[tuple[_Stamp, _Stamp, _Stamp], Identity]] = {}
"""Identities read so far, by setting, with the stamps of the key, its ``.pub`` and
its ``-cert.pub``: a connection attempt (every 2 s for a refusing host, for every
host) reads no file and parses no key unless one changed."""
_LOADED_MAX = 256


def _stamp(path: str) -> _Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def load_identity(setting: str) -> Identity:
    """Read ``setting`` (hosts.yaml's ``identity_file``); a file that is missing,
    unreadable or not a private key is a ``SetupFailure`` naming the path and field."""
    path = Path(setting).expanduser()
    stamps = (_stamp(str(path)), _stamp(f"{path}.pub"), _stamp(f"{path}-cert.pub"))
    cached = _LOADED.get(setting)
    if cached is not None and cached[0] == stamps and stamps[0] is not None:
        return cached[1]
    identity = _read_identity(setting, path)
    if len(_LOADED) >= _LOADED_MAX:
        _LOADED.clear()
    _LOADED[setting] = (stamps, identity)
    return identity


def _read_identity(setting: str, path: Path) -> Identity:
    try:
        data = read_regular_file(path, _MAX_KEY_FILE)
    except OSError as exc:
        raise SetupFailure(
            HostStatus.AUTH_FAILED, unreadable_file(setting, "identity_file", exc)
        ) from None
    try:
        key = asyncssh.import_private_key(data)
    except (asyncssh.KeyImportError, ValueError) as exc:
        if not str(exc).startswith("Passphrase"):
            raise SetupFailure(
                HostStatus.AUTH_FAILED,
                f"{clean(setting, 200)} (hosts.yaml identity_file) is not a usable private key: "
                f"{clean(exc, 120)}",
            ) from None
        return Identity(setting, str(path), _public_half(path, data), encrypted=True)
    try:
        keypairs = tuple(asyncssh.load_keypairs([str(path)]))
    except (OSError, asyncssh.KeyImportError, ValueError):
        keypairs = ()  # (asyncssh reads the file itself at the connection, and says why)
    return Identity(setting, str(path), key.convert_to_public(), encrypted=False, keypairs=keypairs)


def _public_half(path: Path, data: bytes) -> asyncssh.SSHKey | None:
    """The public key of an encrypted private key: its ``.pub``, else the clear header."""
    with contextlib.suppress(OSError, asyncssh.KeyImportError, ValueError):
        return asyncssh.import_public_key(read_regular_file(f"{path}.pub", _MAX_KEY_FILE))
    return openssh_public_key(data)


def openssh_public_key(data: bytes) -> asyncssh.SSHKey | None:
    """The public key stored unencrypted in an ``openssh-key-v1`` private key file."""
    lines = data.strip().splitlines()
    if len(lines) < 3 or not lines[0].startswith(b"-----BEGIN OPENSSH PRIVATE KEY"):
        return None
    try:
        blob = base64.b64decode(b"".join(line.strip() for line in lines[1:-1]))
    except (binascii.Error, ValueError):
        return None
    if not blob.startswith(_OPENSSH_MAGIC):
        return None
    pos = len(_OPENSSH_MAGIC)

    def take(size: int) -> bytes:
        nonlocal pos
        chunk = blob[pos : pos + size]
        if len(chunk) != size:
            raise ValueError("truncated key file")
        pos += size
        return chunk

    def string() -> bytes:
        return take(int.from_bytes(take(4), "big"))

    try:
        string(), string(), string()  # cipher, KDF, KDF options
        if int.from_bytes(take(4), "big") < 1:
            return None
        return decode_ssh_public_key(string())
    except (ValueError, asyncssh.KeyImportError):
        return None


async def agent_holds(identity: Identity, agent_path: str | None) -> bool:
    """Whether the agent at ``agent_path`` holds ``identity``'s key (any key, when its
    public half is unknown); False when there is no agent or it does not answer."""
    if not agent_path:
        return False
    try:
        agent = await asyncssh.connect_agent(agent_path)
    except (OSError, asyncssh.Error):
        return False
    try:
        keys = await agent.get_keys()
    except (OSError, asyncssh.Error, ValueError):
        return False
    finally:
        agent.close()
        with contextlib.suppress(Exception):
            await agent.wait_closed()
    if identity.public is None:
        return bool(keys)
    return any(key.public_data == identity.public.public_data for key in keys)
