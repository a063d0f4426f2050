"""hosts.yaml's ``slurm:`` section: Slurm as the scheduler.

A plain frozen dataclass with its own checks (``SlurmConfig.parse``), not a pydantic
model: a CLI verb in front of Slurm reads the section without loading pydantic and
the rest of the configuration's models, so ``gputui queue`` costs little more than
``squeue``. ``models.Config`` holds it like any other section (its ``slurm`` field
calls ``parse``), with the same rules as every model there: strict types (YAML's
``true`` is no number, "5" is no number), numbers within bounds, unknown keys
refused, each problem one line naming its field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from gputui.common.i18n import _
from gputui.config.sshjump import parse_chain

REFRESH_S = (2.0, 600.0)
COMMAND_TIMEOUT_S = (1.0, 600.0)
MAX_MAP = {"partitions": 256, "qos": 256, "nodes": 65_536}


def slurm_name(value: object, what: str) -> str:
    """A partition, QOS or node name as Slurm takes it on a command line."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 64
        or not all(c.isascii() and (c.isalnum() or c in "_.-") for c in value)
    ):
        said = _("{value} is not a Slurm name (letters, digits, '_', '.', '-'; at most 64)")
        raise ValueError(f"{what}: " + said.format(value=repr(str(value)[:40])))
    return value


def _login(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("login: " + _("give local, or one [user@]host[:port]"))
    if value == "local":
        return value
    try:
        parse_chain(value)
    except ValueError as exc:
        raise ValueError("login: " + str(exc).removeprefix(f"proxy_jump {value!r}: ")) from None
    if "," in value:
        raise ValueError("login: " + _("give one [user@]host[:port], or local"))
    return value


def _seconds(
    raw: Mapping[str, Any], key: str, bounds: tuple[float, float], default: float
) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key}: " + _("give a number of seconds"))
    low, high = bounds
    if not low <= value <= high:
        said = _("give {low} to {high} seconds, not {value}")
        raise ValueError(
            f"{key}: " + said.format(low=f"{low:g}", high=f"{high:g}", value=f"{value:g}")
        )
    return float(value)


def _names(raw: Mapping[str, Any], key: str, *, keys_are_names: bool) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: " + _("give a mapping"))
    if len(value) > MAX_MAP[key]:
        raise ValueError(f"{key}: " + _("at most {most} entries").format(most=MAX_MAP[key]))
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or len(k) > 255 or not k.isprintable():
            said = _("{value} is not a name").format(value=repr(str(k)[:40]))
            raise ValueError(f"{key}: {said}")
        if keys_are_names:
            slurm_name(k, f"{key}.{k}")
            if not isinstance(v, str) or not v or len(v) > 255 or not v.isprintable():
                raise ValueError(f"{key}.{k}: " + _("give a host name"))
            out[k] = v
        else:
            out[k] = slurm_name(v, f"{key}.{k}")
    return out


def _path(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 4096 or not value.isprintable():
        raise ValueError("ssh_config: " + _("give the path of an OpenSSH client config"))
    return value


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    """Slurm as the scheduler: gputui shows and drives what Slurm decides."""

    login: str = "local"
    """Where Slurm's commands run: ``local`` (this machine is a login node), or a login
    node ``[user@]host[:port]`` reached with OpenSSH (``ssh``), as the calling user."""
    refresh_s: float = 5.0
    """The console asks Slurm at most this often (one squeue and one sinfo a refresh),
    2 to 600 seconds."""
    command_timeout_s: float = 30.0
    """How long one Slurm command may take before gputui gives up on it (1 to 600 s)."""
    ssh_config: str | None = None
    """With a ``login`` node: the OpenSSH client config ``ssh -F`` reads (default: the
    user's own, ``~/.ssh/config``)."""
    partitions: Mapping[str, str] = field(default_factory=dict)
    """Pool name -> the partition ``submit --pool`` asks for (a pool not listed is
    taken to be a partition's name)."""
    qos: Mapping[str, str] = field(default_factory=dict)
    """Priority class -> the QOS ``submit --priority`` asks for."""
    nodes: Mapping[str, str] = field(default_factory=dict)
    """Slurm node name -> the hosts.yaml host it is (a node not listed is taken to be
    the host of the same name)."""

    def __post_init__(self) -> None:
        self.parse(
            {
                "login": self.login,
                "refresh_s": self.refresh_s,
                "command_timeout_s": self.command_timeout_s,
                "ssh_config": self.ssh_config,
                "partitions": self.partitions,
                "qos": self.qos,
                "nodes": self.nodes,
            }
        )

    @classmethod
    def parse(cls, raw: object) -> SlurmConfig:
        """The section from what YAML gave; ``ValueError`` ``field: problem`` else."""
        if isinstance(raw, SlurmConfig):
            return raw
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ValueError(_("give a mapping of settings"))
        known = {f.name for f in fields(cls)}
        for key in raw:
            if key not in known:
                said = _("not a setting (one of {names})").format(names=", ".join(sorted(known)))
                raise ValueError(f"{str(key)[:40]!r}: {said}")
        values = {
            "login": _login(raw.get("login", "local")),
            "refresh_s": _seconds(raw, "refresh_s", REFRESH_S, 5.0),
            "command_timeout_s": _seconds(raw, "command_timeout_s", COMMAND_TIMEOUT_S, 30.0),
            "ssh_config": _path(raw.get("ssh_config")),
            "partitions": _names(raw, "partitions", keys_are_names=False),
            "qos": _names(raw, "qos", keys_are_names=False),
            "nodes": _names(raw, "nodes", keys_are_names=True),
        }
        made = object.__new__(cls)
        for key, value in values.items():
            object.__setattr__(made, key, value)
        return made

    def host_of(self, node: str) -> str:
        return self.nodes.get(node, node)

    def node_of(self, host: str) -> str:
        return node_of(self.nodes, host)


def node_of(nodes: Mapping[str, str], host: str) -> str:
    """The Slurm node a hosts.yaml host is, by ``slurm.nodes`` (node -> host): the node
    that maps to it, else the node of the same name."""
    for node, name in nodes.items():
        if name == host:
            return node
    return host
