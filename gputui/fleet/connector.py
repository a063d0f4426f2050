"""``HostConnector``: how one host's SSH connection is opened.

It builds the asyncssh options (ssh_config, our known_hosts with a verdict, the
identity file, AES-GCM first unless something chose ciphers), follows the ProxyJump
chain through the fleet's shared bastion connections, and waits for the fleet-wide
handshake gate. What to do with the connection is ``HostLink``'s business.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.config import SSHClientConfig
from asyncssh.encryption import get_default_encryption_algs

from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.config.models import ResolvedHost
from gputui.fleet.failures import (
    EDGE_ERRORS,
    Failure,
    SetupFailure,
    TunnelFailure,
    classify,
    unreadable_file,
)
from gputui.fleet.hostkeys import KnownHostsCache, VerifyingClient
from gputui.fleet.identity import Identity, agent_holds, load_identity
from gputui.fleet.jumps import Chain, JumpFailure, JumpLease, JumpPool, parse_chain
from gputui.fleet.session import encryption_preference
from gputui.telemetry import HostStatus

_DEFAULT_CIPHERS = list(get_default_encryption_algs())
_PREFERRED_CIPHERS = encryption_preference()


def ssh_config_files(host: ResolvedHost) -> list[str]:
    """The host's ssh_config file when it exists; ``[]`` (not the default file) otherwise."""
    if not host.ssh_config:
        return []
    path = Path(host.ssh_config).expanduser()
    return [str(path)] if path.is_file() else []


def configured_jump(host: ResolvedHost) -> str | None:
    """The ProxyJump the host goes through: hosts.yaml's, else its ssh_config's.

    Reads files only (asyncssh's own ssh_config parser, matched on the address as a
    connection would be); connects nowhere. None when there is no jump, or the
    ssh_config cannot be read (the connection would then say why).
    """
    if host.proxy_jump:
        return None if host.proxy_jump.strip().lower() == "none" else host.proxy_jump
    files = ssh_config_files(host)
    if not files:
        return None
    try:
        config = SSHClientConfig.load(
            None,
            files,
            False,
            False,
            False,
            getpass.getuser(),
            host.user if host.user is not None else (),
            host.address,
            host.port if host.port is not None else (),
        )
    except (OSError, ValueError, TypeError, asyncssh.Error, KeyError):  # TypeError: its API moved
        return None
    jump = config.get("ProxyJump")
    if not isinstance(jump, str) or jump.strip().lower() == "none":
        return None
    return clean(jump, 200) or None


class HostConnector:
    """Opens SSH connections to one host, directly or through its bastions."""

    def __init__(
        self,
        host: ResolvedHost,
        *,
        gate: asyncio.Semaphore,
        known_hosts: KnownHostsCache,
        jumps: JumpPool,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``gate`` bounds handshakes fleet-wide; ``connect_options`` are extra asyncssh
        options, applied over everything hosts.yaml and ssh_config say."""
        self.host = host
        self._gate = gate
        self._known_hosts = known_hosts
        self._jumps = jumps
        self._extra = dict(connect_options or {})
        self._identity = str(Path(host.identity_file).expanduser()) if host.identity_file else None
        self._loaded_identity: Identity | None = None
        self.user = host.user or getpass.getuser()
        """Who we log in as: hosts.yaml's user, else ssh_config's, else the local one."""

    async def open(
        self, box: list[VerifyingClient]
    ) -> tuple[asyncssh.SSHClientConnection, JumpLease | None]:
        """The connection to the host, and the bastion lease it holds (release it after).

        Each ``VerifyingClient`` used is appended to ``box``, so that a failure can be
        explained by its host-key verdict.
        """
        options = await self._options(self.host.address, self.host.port, self.host.user, box)
        self.user = str(options.username or self.user)
        chain = self._jump_chain(options)
        if not chain:
            async with self._gate:
                conn = await self._connect(self.host.address, options, None)
            return conn, None
        # Through a bastion: its one shared connection, then at most a few handshakes
        # through it at once (then the fleet-wide gate), each within connect_timeout.
        lease = await self._jumps.acquire(chain, self._jump_settings(), self._open_hop)
        try:
            async with lease.handshakes, self._gate:
                try:
                    conn = await self._connect(self.host.address, options, lease.conn)
                except asyncssh.ChannelOpenError as exc:
                    # The bastion would not forward to the host (direct-tcpip): the host
                    # refused or cannot be routed to, not a failure of the helper.
                    raise TunnelFailure(str(chain[-1]), exc) from exc
        except BaseException:
            lease.release()
            raise
        return conn, lease

    async def _connect(
        self,
        host: str,
        options: asyncssh.SSHClientConnectionOptions,
        through: asyncssh.SSHClientConnection | None,
    ) -> asyncssh.SSHClientConnection:
        """One connection within connect_timeout; a refusal caused by an encrypted
        identity file that no agent holds is said as such."""
        try:
            conn: asyncssh.SSHClientConnection = await within(
                # config=None: the options already hold the ssh_config there is (or
                # none, when it is off); () would make asyncssh read ~/.ssh/config.
                asyncssh.connect(host, options=options, tunnel=through, config=None),
                self.host.connect_timeout,
            )
        except asyncssh.PermissionDenied:
            identity = self._loaded_identity
            if identity is not None and identity.encrypted:
                agent = options.agent_path
                if not await agent_holds(identity, agent):
                    raise SetupFailure(HostStatus.AUTH_FAILED, identity.agent_hint(agent)) from None
            raise
        return conn

    async def _options(
        self,
        host: str,
        port: int | None,
        user: str | None,
        box: list[VerifyingClient],
        **more: Any,
    ) -> asyncssh.SSHClientConnectionOptions:
        """The asyncssh options for ``host`` (this host or one of its bastions)."""
        known = self._known_hosts.load(self.host.known_hosts)
        if known.unreadable is not None and self.host.known_hosts:
            message = unreadable_file(self.host.known_hosts, "known_hosts", known.unreadable)
            raise SetupFailure(HostStatus.HOST_KEY_UNKNOWN, message)
        client = VerifyingClient(known)
        box.append(client)
        kwargs: dict[str, Any] = {
            "config": self._ssh_configs(),
            "host": host,
            "known_hosts": client.known_hosts.entries,
            "client_factory": lambda: client,
            "agent_forwarding": False,
            "x11_forwarding": False,
            "keepalive_interval": self.host.keepalive_interval or (),
            "connect_timeout": self.host.connect_timeout,
        }
        if port is not None:
            kwargs["port"] = port
        if user is not None:
            kwargs["username"] = user
        identity = None
        if self.host.identity_file:
            # Like ``ssh -i``: the agent's copy of this key first (only that one: a
            # full agent would trip MaxAuthTries), the file itself when unencrypted.
            identity = self._loaded_identity = load_identity(self.host.identity_file)
            kwargs["client_keys"] = list(identity.keypairs) or [identity.path]
            kwargs["ignore_encrypted"] = True
            if identity.public is not None:
                kwargs["agent_identities"] = [identity.public]
        kwargs.update(self._extra)
        kwargs.update(more)
        chosen = "encryption_algs" in kwargs
        if not chosen and not kwargs["config"]:
            # No ssh_config to choose ciphers: AES-GCM first from the start (one
            # construction, not two: they run prepare and cost a fleet's connect burst).
            kwargs["encryption_algs"] = _PREFERRED_CIPHERS
            chosen = True
        options: asyncssh.SSHClientConnectionOptions = (
            await asyncssh.SSHClientConnectionOptions.construct(**kwargs)
        )
        if identity is not None and identity.encrypted and not options.agent_path:
            raise SetupFailure(HostStatus.AUTH_FAILED, identity.agent_hint(options.agent_path))
        if not chosen and list(options.encryption_algs) == _DEFAULT_CIPHERS:
            # Neither ssh_config (Ciphers) nor the caller chose: offer AES-GCM first
            # (every default stays allowed, so any server still finds a match).
            options = await asyncssh.SSHClientConnectionOptions.construct(
                options=options, config=None, encryption_algs=_PREFERRED_CIPHERS
            )
        return options

    def _ssh_configs(self) -> list[str]:
        """The ssh_config file when it exists; ``[]`` (not the default file) otherwise."""
        return ssh_config_files(self.host)

    # -- bastions ---------------------------------------------------------------------

    def _jump_chain(self, options: asyncssh.SSHClientConnectionOptions) -> Chain:
        """The ProxyJump chain: hosts.yaml's, else ssh_config's (asyncssh's ``tunnel``)."""
        spec = self.host.proxy_jump or options.tunnel
        if not spec:
            return ()
        if not isinstance(spec, str):
            raise ValueError(f"unsupported tunnel setting {type(spec).__name__}")
        return parse_chain(spec)

    def _jump_settings(self) -> tuple[Any, ...]:
        """What, besides the chain, decides how bastions are reached (the pool's key)."""
        extra = tuple(sorted((k, repr(v)) for k, v in self._extra.items()))
        return (self._identity, self.host.known_hosts, self.host.ssh_config, extra)

    async def _open_hop(
        self, chain: Chain, through: asyncssh.SSHClientConnection | None
    ) -> asyncssh.SSHClientConnection:
        """Connect to the bastion ``chain[-1]`` (the pool shares it between hosts).

        Its host key is checked like any host's: our known_hosts entries and a verdict
        with fingerprints, never asyncssh's defaults. Its own ssh_config ProxyJump is
        not followed: the chain says how it is reached.
        """
        hop = chain[-1]
        box: list[VerifyingClient] = []
        user = hop.user or getpass.getuser()
        try:
            options = await self._options(hop.host, hop.port, hop.user, box, tunnel=None)
            user = str(options.username or user)
            async with self._gate:
                try:
                    return await self._connect(hop.host, options, through)
                except asyncssh.ChannelOpenError as exc:
                    if through is None:
                        raise
                    raise TunnelFailure(str(chain[-2]), exc) from exc
        except (*EDGE_ERRORS, SetupFailure, TunnelFailure, ValueError) as exc:
            client = box[0] if box else None
            raise JumpFailure(self._hop_failure(exc, str(hop), user, client)) from exc

    def _hop_failure(
        self, exc: BaseException, hop: str, user: str, client: VerifyingClient | None
    ) -> Failure:
        """Why a bastion could not be reached, said as such."""
        address = hop.rpartition("@")[2]
        verdict = client.verdict if client is not None else None
        timeout = self.host.connect_timeout
        failure = classify(exc, user=user, address=address, timeout=timeout, verdict=verdict)
        return replace(failure, message=f"bastion {hop}: {failure.message}")
