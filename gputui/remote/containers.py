"""A job in a container, and a job in a Python environment: the checks and the argv.

A ``launch`` may name an ``image`` and its ``runtime`` (docker, podman or
apptainer), or an environment to activate (``conda``, ``venv``). Everything is
checked here before anything starts, and nothing is ever put in a shell line: the
runtime's command line is an argv, the job's environment variables reach Docker and
Podman by name only (``--env KEY``: the value comes from the runtime's own
environment, so it is never on a command line), and the GPUs go by UUID, never by
index.

The container is named and labelled with the job, runs as the job's user and
group, and is removed with the job: the supervisor runs ``cleanup`` (``RUNTIME rm
--force NAME``, as the job's user) once the job's own process has ended, whatever
ended it (its own exit, a kill, a preemption, the time limit), before it records
the end. Apptainer runs the container as the calling process's own children, so
the job's process group is all there is to stop.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, NamedTuple, Sequence

from .signals import bad_request

RUNTIMES = ("docker", "podman", "apptainer")
IMAGE_MAX = 512
# A registry reference (host[:port]/path[:tag][@sha256:digest]), an apptainer URI
# (docker://..., library://...) or a .sif path: no whitespace, no shell
# metacharacter, and never a leading "-" that a runtime would read as an option.
IMAGE_RE = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/:@+-]{0,511}")
CONDA_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
ENV_PATH_MAX = 4096
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
LABEL_KEY = "gputui.job"
"""The label that names the job a container runs (``docker ps --filter label=...``)."""
RUN_LABEL_KEY = "gputui.run"
# Variables of the host's login environment that would break a container's own
# (its PATH, its HOME): not passed in. Everything else the job has is.
HOST_ONLY_ENV = frozenset(
    {"PATH", "HOME", "SHELL", "USER", "LOGNAME", "PWD", "OLDPWD", "HOSTNAME", "TMPDIR"}
)
# Variables the NVIDIA container toolkit reads to choose the devices a container gets
# (and the MIG management rights): the job's own value would override its
# allocation wherever the toolkit's hook or runtime reads the container's
# environment (``nvidia`` as Docker's default runtime, Podman's OCI hook). Never
# passed from the job; NVIDIA_VISIBLE_DEVICES is set to the job's UUIDs (``void``
# with none), over whatever the image sets.
GPU_ENV = "NVIDIA_VISIBLE_DEVICES"
TOOLKIT_ENV = frozenset({GPU_ENV, "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"})


def check_image(value: Any) -> str:
    if not isinstance(value, str) or not IMAGE_RE.fullmatch(value):
        shown = str(value)[:60]
        raise bad_request(
            f"image {shown!r} is not an image name (letters, digits, ._/:@+-;"
            f" at most {IMAGE_MAX}; no leading -)"
        )
    return value


def check_runtime(value: Any) -> str:
    if value not in RUNTIMES:
        raise bad_request(f"runtime must be one of {', '.join(RUNTIMES)}, got {str(value)[:20]!r}")
    return str(value)


def check_env_path(value: Any, what: str) -> str:
    """An absolute directory path that is safe to put on PATH (no ``:``, no control)."""
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or len(value) > ENV_PATH_MAX
        or ":" in value
        or not value.isprintable()
    ):
        raise bad_request(
            f"{what} must be an absolute path without ':' or control characters,"
            f" got {str(value)[:60]!r}"
        )
    return os.path.normpath(value)


def check_conda(value: Any) -> str:
    """A conda environment's name, or its prefix (an absolute path)."""
    if isinstance(value, str) and value.startswith("/"):
        return check_env_path(value, "conda")
    if not isinstance(value, str) or not CONDA_NAME_RE.fullmatch(value):
        raise bad_request(
            f"conda must name an environment (letters, digits, _.+-, at most 64) or be"
            f" its absolute path, got {str(value)[:60]!r}"
        )
    return value


def activation(req: Mapping[str, Any]) -> dict[str, str] | None:
    """The environment a ``launch`` asks to activate (``conda`` or ``venv``), checked."""
    conda, venv = req.get("conda"), req.get("venv")
    if conda is not None and venv is not None:
        raise bad_request("give conda or venv, not both")
    if conda is not None:
        return {"kind": "conda", "value": check_conda(conda)}
    if venv is not None:
        return {"kind": "venv", "value": check_env_path(venv, "venv")}
    return None


class Container(NamedTuple):
    """What the supervisor runs (``argv``), adds to the job's environment, and runs to
    remove the container at the job's end (``cleanup``)."""

    argv: list[str]
    env: dict[str, str]
    cleanup: list[list[str]]
    name: str | None
    runtime: str
    image: str


def bindable(path: str) -> bool:
    """Whether ``--mount type=bind,source=PATH,...`` reads ``path`` as given."""
    return not any(c in path for c in ',"=')


def job_label(env: Mapping[str, str], key: int) -> str:
    """The job's id for the label: the head's (``GPUTUI_JOB_ID``), else the run's."""
    given = env.get("GPUTUI_JOB_ID", "")
    return given if given.isdigit() and len(given) <= 20 else str(key)


def container_name(label: str, ns: str, key: int) -> str:
    """``gputui-job-ID-NS-RUN``: the job's id first; unique per head and per run, so
    a requeued job never meets the container of its previous run."""
    return f"gputui-job-{label}-{ns}-{key}"


def container(
    runtime: str,
    runtime_path: str,
    image: str,
    argv: list[str],
    *,
    uid: int,
    gid: int,
    gpus: list[str],
    env: Mapping[str, str],
    cwd: str,
    ns: str,
    key: int,
    cidfile: str | None = None,
    files: Sequence[str] = (),
) -> Container:
    """The runtime's argv around the job's ``argv`` (``env``: the job's environment;
    ``files``: host files bound read-only at the same path, e.g. a submit script's copy)."""
    for path in files:
        if not bindable(path) or ":" in path or not os.path.isabs(path):
            raise bad_request(f"{path[:60]!r} cannot be bound into a container")
    if runtime == "apptainer":
        # Apptainer passes the caller's environment in and binds the working
        # directory itself; --nvccli reads the GPUs from NVIDIA_VISIBLE_DEVICES.
        extra = {GPU_ENV: ",".join(gpus) or "void"}
        flags = ["--nvccli"] if gpus else []
        for path in files:
            flags += ["--bind", f"{path}:{path}:ro"]
        return Container(
            [runtime_path, "exec", *flags, image, *argv], extra, [], None, runtime, image
        )
    if not bindable(cwd):
        raise bad_request(f'cwd {cwd[:60]!r} cannot be bound into a container (a , " or = in it)')
    label = job_label(env, key)
    name = container_name(label, ns, key)
    cmd = [runtime_path, "run", "--rm", "--init", "--name", name]
    cmd += ["--label", f"{LABEL_KEY}={label}", "--label", f"{RUN_LABEL_KEY}={ns}.{key}"]
    cmd += ["--user", f"{uid}:{gid}"]
    if runtime == "podman" and uid != 0:
        cmd.append("--userns=keep-id")  # rootless: the user's own uid inside, not a subuid
    if gpus and runtime == "docker":
        cmd += ["--gpus", '"device=' + ",".join(gpus) + '"']
    for uuid in gpus if runtime == "podman" else []:
        cmd += ["--device", f"nvidia.com/gpu={uuid}"]
    for name_ in sorted(env):
        if name_ not in HOST_ONLY_ENV and name_ not in TOOLKIT_ENV and ENV_NAME_RE.fullmatch(name_):
            cmd += ["--env", name_]
    cmd += ["--env", f"{GPU_ENV}={','.join(gpus) or 'void'}"]  # UUIDs: no secret
    if cwd != "/":  # the host's root is not bound over the image's
        cmd += ["--mount", f"type=bind,source={cwd},target={cwd}", "--workdir", cwd]
    for path in files:
        cmd += ["--mount", f"type=bind,source={path},target={path},readonly"]
    if cidfile is not None:  # the container's id, to tell its processes by (jobfs)
        cmd += ["--cidfile", cidfile]
    cmd += [image, *argv]  # the image never starts with "-": it ends the options
    cleanup = [[runtime_path, "rm", "--force", name]]
    return Container(cmd, {}, cleanup, name, runtime, image)
