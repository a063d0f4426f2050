"""``gputui env`` and ``gputui run`` for AMD cards: the ROCm variables when every card is
AMD's (ROCm's UUID form), CUDA_VISIBLE_DEVICES otherwise; the helper's rule for that
form is the same one."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from gputui.common.gpu_env import ROCM_UUID, ROCM_UUID_PATTERN, export_line, visible_env
from gputui.remote.amd import ROCR_UUID_RE

AMD = st.integers(1, 2**64 - 1).map(lambda n: f"GPU-{n:016x}")
NVIDIA = st.uuids().map(lambda u: f"GPU-{u}")


def test_the_helper_and_the_client_know_one_rocm_uuid_form() -> None:
    assert ROCR_UUID_RE.pattern == ROCM_UUID_PATTERN == ROCM_UUID.pattern


@given(st.lists(AMD, min_size=1, max_size=8, unique=True))
def test_amd_cards_get_the_rocm_variables(uuids: list[str]) -> None:
    env = visible_env(uuids)
    assert env == {
        "ROCR_VISIBLE_DEVICES": ",".join(uuids),
        "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(uuids))),
        "CUDA_VISIBLE_DEVICES": "",
    }
    words = shlex.split(export_line(uuids).replace(";", " ;"))
    assert words == [
        "export",
        f"ROCR_VISIBLE_DEVICES={','.join(uuids)}",
        ";",
        "export",
        f"HIP_VISIBLE_DEVICES={env['HIP_VISIBLE_DEVICES']}",
        ";",
        "export",
        "CUDA_VISIBLE_DEVICES=",
    ]


@given(st.lists(NVIDIA, min_size=1, max_size=4), st.lists(AMD, max_size=4))
def test_any_nvidia_card_keeps_the_cuda_line(nvidia: list[str], amd: list[str]) -> None:
    uuids = nvidia + amd  # a claim of named cards may hold both: as before, CUDA's line
    assert visible_env(uuids) == {"CUDA_VISIBLE_DEVICES": ",".join(uuids)}
    assert export_line(uuids) == f"export CUDA_VISIBLE_DEVICES={','.join(uuids)}"
