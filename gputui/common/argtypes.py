"""Argument types that the CLI and the console's ``:`` line share (argparse ``type=``).

Stdlib only, so a verb's start stays light and the console need not import the CLI.
"""

from __future__ import annotations

import argparse

MAX_GPUS = 64
"""The head's limit of GPUs in one request (``arg_types.MAX_GPUS_PER_JOB``: all of a
request's GPUs are on one host); a test holds the two equal."""


def gpu_count(text: str) -> int:
    """``-g N``: a whole number of GPUs, 1 to ``MAX_GPUS``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r}") from None
    if not 1 <= value <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_GPUS} GPUs, not {value}")
    return value
