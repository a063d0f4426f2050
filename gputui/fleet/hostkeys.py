"""SSH host key verification that never trusts a key silently.

asyncssh checks the presented key against the known_hosts entries it matched
(hashed names, ``[host]:port`` entries, ``@cert-authority``, ``@revoked``) and, when
the key is not among them, asks ``SSHClient.validate_host_public_key``. Our client
answers "no" every time and records why, so the caller can tell a person exactly
what to do: add an unknown key (with its fingerprint and the file to add it to),
or investigate a changed one (with the presented and the expected fingerprints).

Where hosts.yaml sets no ``known_hosts`` file, keys are checked like OpenSSH does:
against the user's ``~/.ssh/known_hosts`` and the system-wide
``/etc/ssh/ssh_known_hosts`` (GlobalKnownHostsFile), so sites that distribute host
keys centrally just work. A file set in hosts.yaml is used alone, exactly.

Note: passing ``known_hosts=None`` to asyncssh would turn verification *off*; we
always pass a loaded ``SSHKnownHosts`` (empty when no file exists).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from gputui.fleet.localfiles import read_regular_file

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
_MAX_KNOWN_HOSTS = 64 << 20
_Stamp = tuple[int, int, int]


class KeyProblem(enum.Enum):
    UNKNOWN = "unknown"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class HostKeyVerdict:
    """Why a host key was refused, with everything a person needs to act on it."""

    problem: KeyProblem
    host: str
    port: int
    presented: str
    expected: tuple[str, ...]
    known_hosts: str
    """The file to add a key to (the user's, or the one hosts.yaml names)."""
    consulted: tuple[str, ...] = ()
    """Every file whose entries were checked (defaults to ``known_hosts`` alone)."""

    @property
    def message(self) -> str:
        where = self.host if self.port == 22 else f"[{self.host}]:{self.port}"
        if self.problem is KeyProblem.UNKNOWN:
            return (
                f"unknown host key for {where}: server presented {self.presented}; "
                f"verify it and add it to {self.known_hosts}"
            )
        expected = ", ".join(self.expected) or "(none)"
        files = self.consulted or (self.known_hosts,)
        expects = f"{files[0]} expects" if len(files) == 1 else f"{' and '.join(files)} expect"
        return (
            f"HOST KEY CHANGED for {where}: server presented {self.presented}, "
            f"{expects} {expected}; not connecting"
        )


def fingerprint(key: asyncssh.SSHKey) -> str:
    """The OpenSSH-style ``SHA256:...`` fingerprint of a public key."""
    return key.get_fingerprint("sha256")


@dataclass(frozen=True, slots=True)
class KnownHosts:
    """Parsed known_hosts entries, the file to add keys to, and every file consulted."""

    path: str
    entries: asyncssh.SSHKnownHosts
    files: tuple[str, ...]
    unreadable: OSError | None = None
    """Why the file hosts.yaml names cannot be read (missing, a directory, no
    permission); None when it reads, and for the default files, which may be absent."""


class KnownHostsCache:
    """Loads known_hosts files once, and again only when one changes on disk.

    A fleet of hundreds of hosts usually shares one file; reading and parsing it once
    per connection attempt would be wasted work. A user who fixes the file after a
    refused key gets the fix on the next retry (the modification time changed).
    ``global_path`` is OpenSSH's GlobalKnownHostsFile (settable for tests).
    """

    def __init__(self, global_path: str | None = GLOBAL_KNOWN_HOSTS) -> None:
        self.global_path = global_path
        self._cache: dict[tuple[str, ...], tuple[tuple[_Stamp | None, ...], KnownHosts]] = {}

    def load(self, path: str | None) -> KnownHosts:
        """The entries for ``path`` (as set in hosts.yaml), or the user and global files."""
        files: tuple[str, ...]
        if path:
            files = (str(Path(path).expanduser()),)
        else:
            user = str(Path(DEFAULT_KNOWN_HOSTS).expanduser())
            files = (user, self.global_path) if self.global_path else (user,)
        stamps = tuple(_stamp(f) for f in files)
        cached = self._cache.get(files)
        if cached is not None and cached[0] == stamps:
            return cached[1]
        present = tuple(f for f, stamp in zip(files, stamps, strict=True) if stamp is not None)
        texts = [text for f in present for text in _read(f)]
        loaded = KnownHosts(
            path=files[0],
            entries=asyncssh.import_known_hosts("\n".join(texts)),
            files=present or files[:1],
            unreadable=_unreadable(files[0]) if path else None,
        )
        self._cache[files] = (stamps, loaded)
        return loaded


def _stamp(path: str) -> _Stamp | None:
    """What changes when the file does, or when it is made readable (``chmod`` moves
    only ctime and the mode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _unreadable(path: str) -> OSError | None:
    try:
        read_regular_file(path, 0)
    except OSError as exc:
        return exc
    return None


def _read(path: str) -> list[str]:
    """The file's text when it reads and parses; ``[]`` otherwise.

    An unreadable or corrupt file trusts nothing (its keys then show as unknown), and
    never spoils the entries of the other file.
    """
    try:
        text = read_regular_file(path, _MAX_KNOWN_HOSTS).decode("utf-8", errors="replace")
        asyncssh.import_known_hosts(text)
    except (OSError, ValueError, asyncssh.Error):
        return []
    return [text]


class VerifyingClient(asyncssh.SSHClient):
    """An ``SSHClient`` that refuses any key known_hosts did not vouch for, saying why."""

    def __init__(self, known_hosts: KnownHosts) -> None:
        self.known_hosts = known_hosts
        self.verdict: HostKeyVerdict | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only reached when the key is not trusted by the entries asyncssh matched.
        expected_keys = self.known_hosts.entries.match(host, addr, port)[0]
        expected = tuple(dict.fromkeys(fingerprint(k) for k in expected_keys))
        self.verdict = HostKeyVerdict(
            problem=KeyProblem.CHANGED if expected else KeyProblem.UNKNOWN,
            host=host,
            port=port,
            presented=fingerprint(key),
            expected=expected,
            known_hosts=self.known_hosts.path,
            consulted=self.known_hosts.files,
        )
        return False
