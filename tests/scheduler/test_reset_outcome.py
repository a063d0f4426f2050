"""The head's ``reset`` step text from a host's answer, and how long it waits for one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.head.forcefree import _reset_outcome
from gputui.wire.ops import RESET_ANSWER_MARGIN_S, ResetRequest, ResetResult

UUID = "GPU-9402681f-397d-7f4f-8b6c-d4783a3a11d5"


def _value(**kw: Any) -> dict[str, Any]:
    base = {"index": 0, "uuid": UUID, "reset": True, "via": "nvidia-smi"}
    return ResetResult.model_validate({**base, **kw}).model_dump(mode="json")


def test_a_reset_by_nvidia_smi_says_what_it_printed_and_whether_the_memory_is_free() -> None:
    done = _value(message="GPU 00000000:3B:00.0 was successfully reset.", mem_used_mib=3,
                  processes=0)  # fmt: skip
    assert _reset_outcome(done) == (
        True,
        "GPU reset (nvidia-smi: GPU 00000000:3B:00.0 was successfully reset.); "
        "NVML then read 3 MiB used, 0 process(es): free",
    )
    held = _value(mem_used_mib=20480, processes=0)
    assert _reset_outcome(held) == (
        True, "GPU reset; NVML then read 20480 MiB used, 0 process(es): still held"
    )  # fmt: skip
    busy = _value(mem_used_mib=10, processes=1)
    assert _reset_outcome(busy)[1].endswith("10 MiB used, 1 process(es): still held")
    assert _reset_outcome(_value(mem_used_mib=10)) == (True, "GPU reset")  # processes unknown


def test_a_reset_not_done_says_why_and_by_what() -> None:
    timeout = _value(reset=False, error="timeout", message="nvidia-smi did not finish in 60 s")
    assert _reset_outcome(timeout) == (
        False, "nvidia-smi did not reset it: timeout (nvidia-smi did not finish in 60 s)"
    )  # fmt: skip
    sim = _value(reset=False, error="NotSupported", via="nvml")
    assert _reset_outcome(sim) == (False, "NVML did not reset it: NotSupported")


@given(timeout=st.floats(0.1, 600), default=st.floats(1, 120))
def test_the_head_waits_past_the_resets_own_timeout(timeout: float, default: float) -> None:
    wait = ResetRequest(index=0, uuid=UUID, timeout_s=timeout).answer_within(default)
    assert wait >= timeout + RESET_ANSWER_MARGIN_S and wait >= default


@given(message=st.text(max_size=2000), error=st.text(max_size=300))
def test_any_answer_text_reaches_the_head_clean_and_capped(message: str, error: str) -> None:
    value = _value(reset=False, error=error, message=message)
    ok, outcome = _reset_outcome(value)
    assert ok is False and "\n" not in outcome and "\x1b" not in outcome
    assert len(value["message"]) <= 512 and len(value["error"]) <= 128
