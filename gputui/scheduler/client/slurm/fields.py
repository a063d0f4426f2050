"""What gputui asks Slurm's ``squeue`` and ``sinfo`` for, and the delimiters of a call.

Light on purpose (the standard library's ``os`` only): a bare ``gputui queue`` starts
its ``squeue`` from these before the rest of the Slurm backend (its parsers, its
config model) is even loaded, so the listing runs while they load. ``parse`` reads
what comes back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final, TypeAlias

Fields: TypeAlias = tuple[tuple[str, str], ...]
"""(key, ``%`` field letter) pairs, in the order asked."""

MAX_OUTPUT: Final = 64 << 20
"""What one Slurm command may print before it is cut (a queue of ~100k jobs)."""
JOB_FIELDS: Final = (
    ("id", "%A"),
    ("display_id", "%i"),
    ("state", "%T"),
    ("reason", "%r"),
    ("user", "%u"),
    ("group", "%g"),
    ("tres", "%b"),
    ("nodes", "%D"),
    ("host", "%N"),
    ("time_limit", "%l"),
    ("submitted", "%V"),
    ("started", "%S"),
    ("ended", "%e"),
    ("priority", "%Q"),
    ("qos", "%q"),
    ("partition", "%P"),
    ("dependency", "%E"),
    ("cwd", "%Z"),
    ("name", "%j"),
    ("comment", "%k"),
)
"""What ``squeue`` is asked for, as (key, field letter), in order."""

TABLE_KEYS: Final = frozenset(
    {"id", "display_id", "state", "reason", "user", "tres", "nodes", "host", "started",
     "ended", "name"}
)  # fmt: skip
"""What the queue's table shows of a job (``gputui queue`` without ``--json`` or
``-o``): a listing only for it asks ``squeue`` for these fields (``table_fields``),
and its views hold None for the rest. At 2,000 jobs that is about a quarter of the
output, and ``squeue`` a third quicker: ``%g`` alone (each job's group name, looked up
for each job) is about a third of its time."""


def table_fields() -> Fields:
    """``JOB_FIELDS`` that the queue's table shows (``TABLE_KEYS``), in order."""
    return tuple(f for f in JOB_FIELDS if f[0] in TABLE_KEYS)


NODE_FIELDS: Final = (
    ("name", "%N"),
    ("state", "%T"),
    ("gres", "%G"),
    ("partition", "%P"),
    ("reason", "%E"),
)
"""What ``sinfo -N`` is asked for, one record a node and partition."""


class Markers:
    """The field and record delimiters of one call: control characters and a nonce
    (64 random bits a call)."""

    __slots__ = ("nonce",)

    def __init__(self, nonce: str | None = None) -> None:
        self.nonce = os.urandom(8).hex() if nonce is None else nonce

    @property
    def field(self) -> str:
        return f"\x1f{self.nonce}\x1f"

    @property
    def record(self) -> str:
        return f"\x1e{self.nonce}\x1e"

    def format(self, letters: Iterable[str]) -> str:
        """An ``-o`` format of ``letters`` with these delimiters (``%`` in the nonce
        cannot occur: it is hex). Slurm ends each record's line with a newline."""
        return self.field.join(letters) + self.record


def squeue_argv(markers: Markers, asked: Fields, *extra: str) -> tuple[str, ...]:
    """``squeue``'s command line for the fields ``asked`` with ``markers``, selecting
    what ``extra`` says (none: every job not ended)."""
    return ("squeue", "--noheader", *extra, "-o", markers.format(letter for _, letter in asked))
