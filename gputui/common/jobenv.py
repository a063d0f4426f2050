"""What a job runs in: its environment variables (``--env``, ``--export``), a Python
environment to activate (``--conda``, ``--venv``), a container image and runtime
(``--image``, ``--runtime``). One set of rules for the command line, the console's
form and the head, which checks every submission again.

The helper, shipped alone, keeps its own copy of the patterns
(``gputui.remote.containers``); ``tests/unit/test_one_source.py`` holds them equal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

Runtime = Literal["docker", "podman", "apptainer"]
"""The container runtimes a job may name (``--runtime``; config ``jobs.runtime``)."""
RUNTIMES: tuple[str, ...] = get_args(Runtime)
DEFAULT_RUNTIME: Runtime = "docker"
IMAGE_MAX = 512
IMAGE_PATTERN = r"[A-Za-z0-9/][A-Za-z0-9._/:@+-]{0,511}"
"""A registry reference, an apptainer URI (``docker://...``) or a ``.sif`` path: no
whitespace, no shell metacharacter, never a leading ``-`` a runtime would take for
an option."""
CONDA_NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}"
ENV_PATH_MAX = 4096
ENV_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
"""An environment variable's name, for the command line, the head and the wire alike
(``is_env_name``; the wire's ``launch`` anchors it)."""
ENV_MAX_VARS = 256
"""Environment variables one job may carry."""
ENV_MAX_BYTES = 64 * 1024
"""Their names and values together, in characters."""
RESERVED_ENV = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "GPUTUI_JOB_ID", "GPUTUI_SIM_GPU",
    "GPUTUI_ARRAY_JOB_ID", "GPUTUI_ARRAY_TASK_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
)  # fmt: skip
"""Variables the head (or the helper) sets for every job: a submission may not."""

_IMAGE = re.compile(IMAGE_PATTERN)
_CONDA = re.compile(CONDA_NAME_PATTERN)
_ENV_NAME = re.compile(ENV_NAME_PATTERN)


class JobEnvError(ValueError):
    """A bad ``--env``, ``--export``, ``--conda``, ``--venv`` or ``--image``: one line."""


def _shown(value: str) -> str:
    return repr(value[:60])


def check_image(value: str) -> str:
    if not _IMAGE.fullmatch(value):
        raise JobEnvError(
            f"image {_shown(value)} is not an image name (letters, digits, ._/:@+-;"
            f" at most {IMAGE_MAX}; no leading -)"
        )
    return value


def check_runtime(value: str) -> str:
    if value not in RUNTIMES:
        raise JobEnvError(f"runtime must be one of {', '.join(RUNTIMES)}, got {_shown(value)}")
    return value


def check_env_path(value: str, what: str) -> str:
    """An absolute path that is safe on PATH: no ``:``, no control characters."""
    if (
        not value.startswith("/")
        or len(value) > ENV_PATH_MAX
        or ":" in value
        or not value.isprintable()
    ):
        raise JobEnvError(
            f"{what} must be an absolute path without ':' or control characters,"
            f" got {_shown(value)}"
        )
    return os.path.normpath(value)


def check_conda(value: str) -> str:
    """A conda environment's name, or its prefix (an absolute path)."""
    if value.startswith("/"):
        return check_env_path(value, "conda")
    if not _CONDA.fullmatch(value):
        raise JobEnvError(
            "conda must name an environment (letters, digits and _.+-, at most 64) or"
            f" be its absolute path, got {_shown(value)}"
        )
    return value


def is_env_name(name: str) -> bool:
    """Whether ``name`` may name an environment variable a job carries."""
    return _ENV_NAME.fullmatch(name) is not None


def check_env_name(name: str, flag: str = "--env") -> str:
    if not is_env_name(name):
        raise JobEnvError(
            f"{flag}: {_shown(name)} is not an environment variable name (letters, digits,"
            " _; not starting with a digit)"
        )
    return name


def env_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``--env``): the name checked, the value as given."""
    name, sep, value = text.partition("=")
    if not sep:
        raise JobEnvError(f"--env {_shown(text)}: give KEY=VALUE")
    if "\0" in value:
        raise JobEnvError(f"--env {name[:40]}: the value contains a NUL byte")
    return check_env_name(name), value


@dataclass(frozen=True, slots=True)
class Export:
    """``--export``: ``ALL`` of the submitter's environment, ``NONE``, or some names."""

    all: bool = False
    names: tuple[str, ...] = ()


def parse_export(text: str) -> Export:
    """``NONE``, ``ALL``, or ``KEY1,KEY2`` (``ALL,KEY`` is ``ALL``), as Slurm's --export."""
    words = [w.strip() for w in text.split(",")]
    if words == ["NONE"]:
        return Export()
    if not text or any(not w for w in words):
        raise JobEnvError(f"--export {_shown(text)}: give NONE, ALL or KEY1,KEY2,...")
    if "NONE" in words:
        raise JobEnvError("--export: NONE stands alone")
    names = tuple(check_env_name(w, "--export") for w in words if w != "ALL")
    return Export(all="ALL" in words, names=names)


def job_environment(
    export: Export,
    pairs: list[tuple[str, str]],
    environ: Mapping[str, str],
    reserved: Collection[str],
) -> dict[str, str]:
    """The variables a job gets from its submitter: those ``export`` takes from
    ``environ`` (names the head sets itself are left out of ``ALL``, refused when
    named), then the ``--env`` pairs on top; within the head's limits, else one line."""
    env: dict[str, str] = {}
    if export.all:
        env = {
            k: v
            for k, v in environ.items()
            if is_env_name(k) and k not in reserved and "\0" not in v
        }
    for name in export.names:
        if name in reserved:
            raise JobEnvError(f"--export: {name} is set by the head")
        if name in environ:  # a name not set is left out, as Slurm does
            env[name] = environ[name]
    for name, value in pairs:
        if name in reserved:
            raise JobEnvError(f"--env: {name} is set by the head")
        env[name] = value
    size = sum(len(k) + len(v) for k, v in env.items())
    if len(env) > ENV_MAX_VARS or size > ENV_MAX_BYTES:
        what = "--export=ALL" if export.all else "--env and --export"
        raise JobEnvError(
            f"{what}: {len(env)} variables of {size // 1024} KiB, over a job's"
            f" {ENV_MAX_VARS} and {ENV_MAX_BYTES // 1024} KiB; name the ones the job needs"
            " (--export=KEY1,KEY2)"
        )
    return env


def check_wrapping(
    conda: str | None,
    venv: str | None,
    image: str | None,
    runtime: str | None,
    cwd: str | None = None,
) -> None:
    """The combinations that make no sense, refused in one line (``cwd``: the working
    directory Docker or Podman binds into the container, when known)."""
    if conda is not None and venv is not None:
        raise JobEnvError("give --conda or --venv, not both")
    if image is not None and (conda is not None or venv is not None):
        which = "--conda" if conda is not None else "--venv"
        raise JobEnvError(f"{which} with --image: activate the environment in the image")
    if runtime is not None and image is None:
        raise JobEnvError("--runtime needs --image")
    if image is not None and runtime != "apptainer" and cwd and any(c in cwd for c in ',"='):
        raise JobEnvError(
            f"--image: the working directory {_shown(cwd)} cannot be bound into a container"
            ' (a , " or = in it); give another --cwd'
        )


@dataclass(frozen=True, slots=True)
class JobSetup:
    """What a submission asks its command to run in (checked: see ``setup``)."""

    env: Mapping[str, str] = field(default_factory=dict)
    conda: str | None = None
    venv: str | None = None
    image: str | None = None
    runtime: Runtime | None = None

    def __bool__(self) -> bool:
        return bool(self.env) or any((self.conda, self.venv, self.image, self.runtime))

    def args(self) -> dict[str, object]:
        """The submit request's fields for it (those set)."""
        out: dict[str, object] = {"env": dict(self.env)} if self.env else {}
        for key in ("conda", "venv", "image", "runtime"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def setup(
    *,
    env: list[str] | None = None,
    export: str | None = None,
    conda: str | None = None,
    venv: str | None = None,
    image: str | None = None,
    runtime: str | None = None,
    environ: Mapping[str, str],
    cwd: str,
    reserved: Collection[str],
) -> JobSetup:
    """The command line's (or the form's) words checked into a ``JobSetup``: ``venv``
    relative to ``cwd``, the environment from ``environ``; JobEnvError in one line."""
    pairs = [env_pair(item) for item in env or []]
    chosen = parse_export(export) if export is not None else Export()
    variables = job_environment(chosen, pairs, environ, reserved)
    checked_conda = check_conda(conda) if conda is not None else None
    checked_venv = (
        check_env_path(os.path.join(cwd, os.path.expanduser(venv)), "--venv")
        if venv is not None
        else None
    )
    checked_image = check_image(image) if image is not None else None
    checked_runtime = cast("Runtime", check_runtime(runtime)) if runtime is not None else None
    check_wrapping(checked_conda, checked_venv, checked_image, checked_runtime, cwd)
    return JobSetup(variables, checked_conda, checked_venv, checked_image, checked_runtime)
