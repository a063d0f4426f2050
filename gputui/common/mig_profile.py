"""MIG profile names (``1g.10gb``): what ``--mig`` asks for and what a helper reports.

Imports only ``re``: the CLI, the head's argument models, the Slurm backend and the
wire models all check a profile with this one pattern (the helper, shipped alone,
keeps a copy that a test holds to this one).
"""

from __future__ import annotations

import re

__all__ = ["PROFILE", "profile_of"]

PROFILE = re.compile(r"(?:[1-8]c\.)?[1-8]g\.[1-9][0-9]{0,3}gb(?:\+[a-z]{1,8}){0,2}")
"""A MIG profile name as NVML and ``nvidia-smi`` write it: ``1g.10gb``, ``3g.40gb``,
``1c.2g.20gb`` (a compute instance smaller than its GPU instance), ``1g.10gb+me``.
Use with ``fullmatch``."""


def profile_of(value: str) -> str | None:
    """The profile named in ``value`` (a MIG device's NVML name, ``NVIDIA A100-SXM4-80GB
    MIG 1g.10gb``, or a profile alone), or None when it names none."""
    found = PROFILE.search(value.lower())
    return found.group(0) if found is not None else None


def mig_arg(text: str) -> str:
    """``--mig PROFILE`` (argparse ``type=``): a MIG profile name, else one clear line."""
    import argparse  # only when a parser calls it: this module otherwise imports only re

    value = text.strip().lower()
    if PROFILE.fullmatch(value) is None:
        raise argparse.ArgumentTypeError(
            f"not a MIG profile: {text[:40]!r} (e.g. 1g.10gb, 2g.20gb, 3g.40gb)"
        )
    return value
