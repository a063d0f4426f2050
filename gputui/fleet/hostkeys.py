"""SSH host key verification that never trusts a key silently.

asyncssh checks the presented key against the known_hosts entries it matched
(hashed names, ``[host]:port`` entries, ``@cert-authority``, ``@revoked``) and, when
the key is not among them, asks ``SSHClient.validate_host_public_key``. Our client
answers "no" every time and records why, so the caller can tell a person exactly
what to do: add an unknown key (with its fingerprint and the file to add it to),
or investigate a changed one (with the presented and the expected fingerprints).

Note: passing ``known_hosts=None`` to asyncssh would turn verification *off*; we
always pass a loaded ``SSHKnownHosts`` (empty when the file does not exist).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


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

    @property
    def message(self) -> str:
        where = self.host if self.port == 22 else f"[{self.host}]:{self.port}"
        if self.problem is KeyProblem.UNKNOWN:
            return (
                f"unknown host key for {where}: server presented {self.presented}; "
                f"verify it and add it to {self.known_hosts}"
            )
        expected = ", ".join(self.expected) or "(none)"
        return (
            f"HOST KEY CHANGED for {where}: server presented {self.presented}, "
            f"{self.known_hosts} expects {expected}; not connecting"
        )


def fingerprint(key: asyncssh.SSHKey) -> str:
    """The OpenSSH-style ``SHA256:...`` fingerprint of a public key."""
    return key.get_fingerprint("sha256")


class KnownHostsCache:
    """Loads each known_hosts file once, and again only when it changes on disk.

    A fleet of hundreds of hosts usually shares one file; reading and parsing it once
    per connection attempt would be wasted work. A user who fixes the file after a
    refused key gets the fix on the next retry (the modification time changed).
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, asyncssh.SSHKnownHosts]] = {}

    def load(self, path: str | None) -> tuple[str, asyncssh.SSHKnownHosts]:
        """The expanded path and its parsed entries (empty when the file is missing)."""
        expanded = str(Path(path or DEFAULT_KNOWN_HOSTS).expanduser())
        try:
            stamp = os.stat(expanded).st_mtime_ns
        except OSError:
            return expanded, asyncssh.import_known_hosts("")
        cached = self._cache.get(expanded)
        if cached is not None and cached[0] == stamp:
            return expanded, cached[1]
        try:
            entries = asyncssh.read_known_hosts(expanded)
        except (OSError, ValueError, asyncssh.Error):
            # An unreadable or corrupt file trusts nothing; every key shows as unknown.
            entries = asyncssh.import_known_hosts("")
        self._cache[expanded] = (stamp, entries)
        return expanded, entries


class VerifyingClient(asyncssh.SSHClient):
    """An ``SSHClient`` that refuses any key known_hosts did not vouch for, saying why."""

    def __init__(self, known_hosts: asyncssh.SSHKnownHosts, path: str) -> None:
        self._known_hosts = known_hosts
        self._path = path
        self.verdict: HostKeyVerdict | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only reached when the key is not trusted by the entries asyncssh matched.
        expected_keys = self._known_hosts.match(host, addr, port)[0]
        expected = tuple(dict.fromkeys(fingerprint(k) for k in expected_keys))
        self.verdict = HostKeyVerdict(
            problem=KeyProblem.CHANGED if expected else KeyProblem.UNKNOWN,
            host=host,
            port=port,
            presented=fingerprint(key),
            expected=expected,
            known_hosts=self._path,
        )
        return False
