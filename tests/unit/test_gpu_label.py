"""A GPU model's short label: the family, and the memory where the family comes in
more than one size; any name at all gives a short, printable, non-empty label."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.common.gpu_label import LABEL_MAX, model_label


@pytest.mark.parametrize(
    ("name", "memory", "label"),
    [
        ("NVIDIA A100-SXM4-80GB", 81_920, "A100-80G"),
        ("NVIDIA A100-PCIE-40GB", 40_960, "A100-40G"),
        ("NVIDIA H100 80GB HBM3", 81_559, "H100-80G"),
        ("NVIDIA H100 PCIe", 81_559, "H100-80G"),  # the size from the memory
        ("Tesla V100-SXM2-32GB", 32_768, "V100-32G"),
        ("NVIDIA GeForce RTX 3090", 24_576, "3090"),
        ("NVIDIA GeForce RTX 4080 SUPER", 16_376, "4080S"),
        ("NVIDIA GeForce GTX 1080 Ti", 11_264, "1080Ti"),
        ("NVIDIA A40", 46_068, "A40"),
        ("NVIDIA L40S", 46_068, "L40S"),
        ("NVIDIA RTX A6000", 49_140, "A6000"),
        ("Quadro RTX 8000", 49_152, "RTX8000"),
        ("NVIDIA RTX 6000 Ada Generation", 49_140, "6000Ada"),
        ("Tesla T4", 15_360, "T4"),
        ("AMD Instinct MI300X", 196_592, "MI300X"),
        ("AMD Instinct MI210", 65_520, "MI210"),
        ("AMD Radeon PRO W7900", 49_136, "W7900"),
        ("AMD Radeon RX 7900 XTX", 24_560, "7900XTX"),
        ("NVIDIA A100-SXM4-80GB", None, "A100-80G"),
        ("NVIDIA H100 PCIe", None, "H100"),  # no size known: none said
        ("NVIDIA H100 PCIe", -5, "H100"),  # nor a nonsense one
        (None, None, "unknown"),
        ("", 0, "unknown"),
        ("NVIDIA", None, "unknown"),
    ],
)
def test_labels_of_real_cards(name: str | None, memory: int | None, label: str) -> None:
    assert model_label(name, memory) == label


@given(st.one_of(st.none(), st.text(max_size=300)), st.one_of(st.none(), st.integers()))
def test_any_name_gives_a_short_printable_label(name: str | None, memory: int | None) -> None:
    label = model_label(name, memory)
    assert 1 <= len(label) <= LABEL_MAX
    assert label.strip() == label and all(ch.isprintable() for ch in label)
