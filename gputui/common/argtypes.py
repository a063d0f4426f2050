"""Argument types that the CLI and the console's ``:`` line share (argparse ``type=``).

Stdlib only, so a verb's start stays light and the console need not import the CLI.
"""

from __future__ import annotations

import argparse

from gputui.common.i18n import _

MAX_GPUS = 64
"""The head's limit of GPUs in one request (``arg_types.MAX_GPUS_PER_JOB``: all of a
request's GPUs are on one host); a test holds the two equal."""


def gpu_count(text: str) -> int:
    """``-g N``: a whole number of GPUs, 1 to ``MAX_GPUS``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("not a number of GPUs: {text}").format(text=repr(text[:40]))
        ) from None
    if not 1 <= value <= MAX_GPUS:
        shown = str(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        raise argparse.ArgumentTypeError(
            _("must be 1 to {most} GPUs, not {value}").format(most=MAX_GPUS, value=shown)
        )
    return value


def job_id(text: str) -> int:
    """A job id: a whole number from 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("not a job id: {text}").format(text=repr(text[:40]))
        ) from None
    if value < 1 or value >= 2**53:
        raise argparse.ArgumentTypeError(_("not a job id: {text}").format(text=repr(text[:40])))
    return value


def job_ids(text: str) -> list[int]:
    """``12,13`` (Slurm's ``afterok:12:13`` style, with commas or colons)."""
    parts = [p for p in text.replace(":", ",").split(",") if p.strip()]
    if not parts or len(parts) > 256:
        raise argparse.ArgumentTypeError(
            _("not a list of job ids: {text}").format(text=repr(text[:60]))
        )
    return [job_id(p.strip()) for p in parts]
