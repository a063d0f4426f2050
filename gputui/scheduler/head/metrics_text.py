"""The text format's pieces, as prometheus_client's ``generate_latest`` writes them:
label blocks, numbers, the ``# HELP``/``# TYPE`` head of a family."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from prometheus_client.utils import floatToGoString

go_string = cast("Callable[[float], str]", floatToGoString)
"""prometheus_client's number format (untyped there)."""

GPU_LABELS = (
    "gpu", "UUID", "modelName", "Hostname", "hostname", "instance", "job", "user", "pool",
)  # fmt: skip
_SORTED = sorted(range(len(GPU_LABELS)), key=lambda i: GPU_LABELS[i])
"""The labels in the order prometheus_client writes them (sorted by name)."""


def escape(value: str) -> str:
    """A label value as the text format writes it (as prometheus_client does)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def block(names: Sequence[str], values: Sequence[str]) -> str:
    """``{name="value",...}`` in prometheus_client's order (sorted by name)."""
    if not names:
        return ""
    if tuple(names) == GPU_LABELS:
        order = _SORTED
    else:
        order = sorted(range(len(names)), key=names.__getitem__)
    return "{" + ",".join(f'{names[i]}="{escape(values[i])}"' for i in order) + "}"


def number(value: float) -> str:
    """prometheus_client's ``floatToGoString``, for a bool or an int too."""
    return go_string(float(value))


def head(name: str, help_text: str, kind: str) -> bytes:
    """A family's ``# HELP`` and ``# TYPE`` lines."""
    doc = help_text.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n".encode()
