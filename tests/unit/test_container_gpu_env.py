"""A job in a container gets the GPUs it was given and no others, whatever its
environment says: the NVIDIA container toolkit reads ``NVIDIA_VISIBLE_DEVICES`` (and
the MIG rights) from a container's environment wherever its hook runs (``nvidia`` as
Docker's default runtime, Podman's OCI hook, Apptainer's ``--nvccli``), so a job's
own value would reach every card of the host."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputui.remote.containers import container

UUID = st.uuids().map(lambda u: f"GPU-{u}")
NAMES = st.sampled_from(
    ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES",
     "NVIDIA_DRIVER_CAPABILITIES", "WANDB_MODE", "CUDA_VISIBLE_DEVICES"]
)  # fmt: skip


def _given_env(argv: list[str]) -> dict[str, str | None]:
    """The container's environment as ``--env`` sets it: NAME (from the runtime's own
    environment) or NAME=VALUE."""
    out: dict[str, str | None] = {}
    for i, word in enumerate(argv[:-1]):
        if word == "--env":
            name, eq, value = argv[i + 1].partition("=")
            out[name] = value if eq else None
    return out


@given(
    st.sampled_from(["docker", "podman", "apptainer"]),
    st.lists(UUID, max_size=4, unique=True),
    st.dictionaries(NAMES, st.sampled_from(["all", "0,1,2,3", "none", ""])),
)
def test_the_gpus_are_the_jobs_whatever_its_environment(
    runtime: str, gpus: list[str], env: dict[str, str]
) -> None:
    box = container(
        runtime, f"/usr/bin/{runtime}", "team/train:1", ["python", "train.py"],
        uid=1000, gid=1000, gpus=gpus, env=env, cwd="/work", ns="ns1", key=7,
    )  # fmt: skip
    want = ",".join(gpus) or "void"
    if runtime == "apptainer":
        # Apptainer passes the caller's environment in: the helper's value wins.
        assert box.env["NVIDIA_VISIBLE_DEVICES"] == want
        assert ("--nvccli" in box.argv) == bool(gpus)
        return
    given_env = _given_env(box.argv)
    assert given_env["NVIDIA_VISIBLE_DEVICES"] == want
    assert "NVIDIA_MIG_CONFIG_DEVICES" not in given_env
    assert "NVIDIA_MIG_MONITOR_DEVICES" not in given_env
    if "WANDB_MODE" in env:
        assert given_env["WANDB_MODE"] is None  # by name: its value stays off the argv
