"""hosts.yaml: the pydantic models and the one loader.

Errors come back as one line each, ``FILE:LINE: field: problem``, so a person can
jump straight to the mistake. Unknown keys are errors: a typo never silently falls
back to a default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_VAR = "GPUTUI_HOSTS"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def search_paths() -> list[Path]:
    """Where the config is looked for when no ``--hosts`` is given, in order."""
    paths: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        paths.append(Path(env).expanduser())
    paths.append(Path("hosts.yaml"))
    paths.append(Path("~/.config/gputui/hosts.yaml").expanduser())
    paths.append(Path("/etc/gputui/hosts.yaml"))
    return paths


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Port = Annotated[int, Field(ge=1, le=65535)]


class SshDefaults(_Model):
    """SSH settings every host inherits unless it sets its own."""

    user: str | None = None
    """Login user; unset means ~/.ssh/config's User, then the local user name."""
    port: Port | None = None
    """SSH port; unset means ~/.ssh/config's Port, then 22."""
    identity_file: str | None = None
    """Private key file; unset means ~/.ssh/config's IdentityFile and the usual defaults."""
    proxy_jump: str | None = None
    """Bastion to go through, ``[user@]host[:port]``, like OpenSSH's ProxyJump."""
    known_hosts: str | None = None
    """known_hosts file to verify host keys against; unset means ~/.ssh/known_hosts."""
    ssh_config: str | None = "~/.ssh/config"
    """OpenSSH client config to honour (User, Port, IdentityFile, ProxyJump); null for none."""
    python: str = "python3"
    """The Python interpreter on the host that runs the helper."""
    connect_timeout: Annotated[float, Field(gt=0, le=300)] = 10.0
    """Seconds to wait for one SSH connection to come up."""
    keepalive_interval: Annotated[float, Field(ge=0, le=3600)] = 15.0
    """Seconds between SSH keepalives; 0 turns them off."""


class HostConfig(_Model):
    """One GPU host."""

    name: str
    """Short unique name shown in the console."""
    address: str | None = None
    """Hostname or IP to connect to; defaults to ``name``."""
    port: Port | None = None
    """SSH port; overrides ``defaults.port``."""
    user: str | None = None
    """Login user; overrides ``defaults.user``."""
    identity_file: str | None = None
    """Private key file; overrides ``defaults.identity_file``."""
    proxy_jump: str | None = None
    """Bastion, ``[user@]host[:port]``; overrides ``defaults.proxy_jump``."""
    known_hosts: str | None = None
    """known_hosts file for this host; overrides ``defaults.known_hosts``."""
    python: str | None = None
    """Interpreter that runs the helper on this host; overrides ``defaults.python``."""
    pool: str = "default"
    """Pool the host's GPUs belong to (used to group and, later, to schedule)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form labels, e.g. ``{rack: r3, owner: vision}``."""
    sim: str | None = None
    """Simulated GPUs instead of NVML, e.g. ``4xrtx3090`` or ``8xa100-80gb,fault=xid:79@3``."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be 1-63 letters, digits, '.', '_' or '-'")
        return value

    @field_validator("sim")
    @classmethod
    def _check_sim(cls, value: str | None) -> str | None:
        if value is not None:
            from gputui.remote.simspec import parse_spec

            parse_spec(value)
        return value


def stale_after(stale_after_s: float, interval: float) -> float:
    """At least 2.5 sampling intervals: one late sample at a slow refresh is not staleness."""
    return max(stale_after_s, 2.5 * interval)


class HealthThresholds(_Model):
    """When a reading becomes a problem worth showing."""

    temp_warn_c: Annotated[int, Field(ge=0, le=150)] = 83
    """GPU temperature (°C) shown as a warning."""
    temp_crit_c: Annotated[int, Field(ge=0, le=150)] = 90
    """GPU temperature (°C) shown as critical."""
    mem_warn_pct: Annotated[float, Field(ge=0, le=100)] = 95.0
    """Memory use, in % of the card's total, shown as a warning."""
    power_warn_pct: Annotated[float, Field(ge=0, le=200)] = 98.0
    """Power draw, in % of the enforced limit, shown as a warning."""
    stale_after_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    """Seconds without a sample before a host shows as stale."""
    ecc_uncorrected_max: Annotated[int, Field(ge=0)] = 0
    """Uncorrected ECC errors tolerated before a GPU is flagged."""

    def stale_after(self, interval: float) -> float:
        """Seconds of silence before a host is stale when it samples every ``interval``."""
        return stale_after(self.stale_after_s, interval)

    @model_validator(mode="after")
    def _ordered(self) -> HealthThresholds:
        if self.temp_warn_c > self.temp_crit_c:
            raise ValueError("temp_warn_c must not be above temp_crit_c")
        return self


class HeadConfig(_Model):
    """Where the scheduler's head daemon runs (used once the scheduler exists)."""

    host: str
    """Host name (from ``hosts`` or any SSH destination) that runs ``gputui head``."""
    socket: str = "/run/gputui/head.sock"
    """The head daemon's Unix socket on that host, reached through SSH."""
    database: str = "/var/lib/gputui/gputui.db"
    """The head's SQLite file (on local disk)."""
    admin_group: str = "gputui-admin"
    """Unix group whose members may act on anyone's jobs, claims and processes."""


class Config(_Model):
    """The whole of hosts.yaml."""

    hosts: list[HostConfig] = Field(default_factory=list)
    """The GPU hosts, in the order the console shows them."""
    defaults: SshDefaults = Field(default_factory=SshDefaults)
    """SSH settings every host inherits."""
    refresh_interval: Annotated[float, Field(ge=0.1, le=60)] = 1.0
    """Seconds between samples from every helper."""
    theme: str = "gputui-dark"
    """Colour theme: a file in themes/ or ~/.config/gputui/themes/, or a Textual theme."""
    health: HealthThresholds = Field(default_factory=HealthThresholds)
    """When readings count as problems."""
    head: HeadConfig | None = None
    """The scheduler's head node; leave out for monitoring only."""
    connect_concurrency: Annotated[int, Field(ge=1, le=1024)] = 32
    """SSH handshakes in flight at once (keep under sshd's MaxStartups across hosts)."""

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: set[str] = set()
        for host in self.hosts:
            if host.name in seen:
                raise ValueError(f"duplicate host name {host.name!r}")
            seen.add(host.name)
        return self

    def resolved(self) -> list[ResolvedHost]:
        return [ResolvedHost.merge(self.defaults, host) for host in self.hosts]


@dataclass(frozen=True, slots=True)
class ResolvedHost:
    """A host with the defaults applied: what the fleet connects to."""

    name: str
    address: str
    port: int | None
    user: str | None
    identity_file: str | None
    proxy_jump: str | None
    known_hosts: str | None
    ssh_config: str | None
    python: str
    connect_timeout: float
    keepalive_interval: float
    pool: str
    labels: dict[str, str]
    sim: str | None

    @classmethod
    def merge(cls, defaults: SshDefaults, host: HostConfig) -> ResolvedHost:
        return cls(
            name=host.name,
            address=host.address or host.name,
            port=host.port if host.port is not None else defaults.port,
            user=host.user or defaults.user,
            identity_file=host.identity_file or defaults.identity_file,
            proxy_jump=host.proxy_jump or defaults.proxy_jump,
            known_hosts=host.known_hosts or defaults.known_hosts,
            ssh_config=defaults.ssh_config,
            python=host.python or defaults.python,
            connect_timeout=defaults.connect_timeout,
            keepalive_interval=defaults.keepalive_interval,
            pool=host.pool,
            labels=dict(host.labels),
            sim=host.sim,
        )


class ConfigError(Exception):
    """hosts.yaml could not be used; ``lines`` holds one ``FILE:LINE: field: problem`` each."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The config file to use, following the documented search order."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError([f"{path}: no such file"])
        return path
    env = os.environ.get(ENV_VAR)
    if env and not Path(env).expanduser().is_file():
        raise ConfigError([f"{Path(env).expanduser()}: no such file (named by ${ENV_VAR})"])
    candidates = search_paths()
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise ConfigError([f"no hosts.yaml found (looked in: {looked}); try --hosts FILE"])


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate ``path``; raise ``ConfigError`` with one line per problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read: {exc.__class__.__name__}: {exc}"]) from None
    return parse_config(text, str(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"{source}:{line + 1}" if line is not None else source
        raise ConfigError([f"{where}: yaml: {problem}"]) from None
    duplicates = list(_duplicate_keys(node, source))
    if duplicates:
        raise ConfigError(duplicates)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{source}:1: (top level): must be a mapping of settings"])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines = sorted(_error_lines(exc, node, source), key=_line_number)
        raise ConfigError(lines) from None


def _duplicate_keys(node: yaml.Node | None, source: str, path: str = "") -> Iterator[str]:
    """YAML lets a later key silently replace an earlier one; here that is an error."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            where = f"{path}.{key}" if path else key
            line = key_node.start_mark.line + 1
            if key in seen:
                yield f"{source}:{line}: {where}: duplicate key (first given on line {seen[key]})"
            else:
                seen[key] = line
            yield from _duplicate_keys(value_node, source, where)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, source, f"{path}[{i}]")


def _line_number(line: str) -> int:
    match = re.match(r"^.*?:(\d+): ", line)
    return int(match.group(1)) if match else 0


def _error_lines(exc: ValidationError, root: yaml.Node | None, source: str) -> Iterator[str]:
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        node, field_path = _locate(root, loc)
        line = node.start_mark.line + 1 if node is not None else 1
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        if error.get("type") == "extra_forbidden":
            message = "unknown key"
        yield f"{source}:{line}: {field_path or '(top level)'}: {message}"


def _locate(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, str]:
    """Follow a pydantic error location through the YAML node tree to its line."""
    node = root
    parts: list[str] = []
    for key in loc:
        if isinstance(key, int):
            parts.append(f"[{key}]")
            if isinstance(node, yaml.SequenceNode) and 0 <= key < len(node.value):
                node = node.value[key]
            continue
        if not isinstance(key, str) or key in ("function-after", "function-before"):
            continue
        parts.append(("." if parts else "") + key)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == key:
                    node = value_node
                    break
    field_path = "".join(parts)
    # Friendlier path for hosts: hosts[2] -> hosts[2] (name) when the name is known.
    if loc and loc[0] == "hosts" and len(loc) > 1 and isinstance(loc[1], int) and root is not None:
        name = _host_name(root, loc[1])
        if name:
            field_path = field_path.replace(f"hosts[{loc[1]}]", f"hosts[{loc[1]}]({name})", 1)
    return node, field_path


def _host_name(root: yaml.Node, index: int) -> str | None:
    """The ``name:`` of the index-th host in the YAML tree, to label its errors."""
    if not isinstance(root, yaml.MappingNode):
        return None
    hosts = next((v for k, v in root.value if k.value == "hosts"), None)
    if not isinstance(hosts, yaml.SequenceNode) or not 0 <= index < len(hosts.value):
        return None
    item = hosts.value[index]
    if not isinstance(item, yaml.MappingNode):
        return None
    for key, value in item.value:
        if key.value == "name" and isinstance(value, yaml.ScalarNode):
            return str(value.value)[:64]
    return None
