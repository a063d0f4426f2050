"""The wire's slotted dataclasses: a GPU's readings, its processes, its NVLinks.

They are checked as the wire's models are (the decoder's tests hold that); here, what
the head and the console do with them besides: copy one with fields changed
(``unchecked``, a model's ``model_copy(update=...)``), and list their fields
(``wire_fields``), the inherited health readings included.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.wire.fields import unchecked, wire_fields
from gputui.wire.health import HealthReadings, NvLinkSample
from gputui.wire.messages import GpuSample, ProcessSample

PROCESSES = st.lists(
    st.builds(ProcessSample, pid=st.integers(1, 4_000_000), user=st.none() | st.just("alice")),
    max_size=3,
).map(tuple)
CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "util_gpu": st.none() | st.integers(0, 100),
    "power_w": st.none() | st.floats(0, 1000),
    "state": st.sampled_from(["ok", "lost", "error"]),
    "processes": PROCESSES,
    "errors": st.dictionaries(st.sampled_from(["fan_pct", "temp_c"]), st.just("NotSupported")),
    "remap_pending": st.none() | st.booleans(),  # (a health reading's, inherited)
    "nvlinks": st.none() | st.just((NvLinkSample(link=0, active=False),)),
}


@given(
    st.builds(GpuSample, index=st.integers(0, 63), uuid=st.just("GPU-1"), processes=PROCESSES),
    st.fixed_dictionaries({}, optional=CHANGES),
)
def test_an_unchecked_copy_is_the_sample_with_the_changes(
    gpu: GpuSample, changes: dict[str, Any]
) -> None:
    before = {name: getattr(gpu, name) for name in wire_fields(GpuSample)}
    copied = unchecked(gpu, **changes)
    assert copied == dataclasses.replace(gpu, **changes)
    assert copied is not gpu
    assert {name: getattr(gpu, name) for name in wire_fields(GpuSample)} == before


def test_the_fields_are_every_slot_and_the_samples_have_no_dict() -> None:
    """A field missing from ``wire_fields`` would be one the decoder's repair and the
    console's deltas do not know; a ``__dict__`` would be the object this saves."""
    names = set(wire_fields(GpuSample))
    assert set(wire_fields(HealthReadings)) < names
    assert {f.name for f in dataclasses.fields(GpuSample)} == names
    for made in (GpuSample(index=0, uuid="GPU-1"), ProcessSample(pid=1), NvLinkSample(link=0)):
        assert not hasattr(made, "__dict__")


def test_a_class_the_copy_would_not_copy_whole_is_refused() -> None:
    """A subclass without ``__slots__`` keeps fields in a ``__dict__`` the slot-by-slot
    copy would drop: refused when first copied, not copied short."""

    class Loose(ProcessSample):  # (no ``__slots__``: a ``__dict__``)
        pass

    loose = Loose(pid=1)
    with pytest.raises(TypeError, match="not slotted"):
        unchecked(loose, pid=2)
