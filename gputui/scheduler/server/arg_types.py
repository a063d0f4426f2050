"""What any op's arguments may be: the limits, the field types, the text rule and
the strict base models every op's argument model builds on.

Everything a client sends is untrusted: the argument models (``op_args`` for the ops
that change something, ``read_args`` for the rest) forbid unknown keys, range-check
every number and cap every size, with the types and limits here.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from gputui.common import jobenv

MAX_ARGV_BYTES = 256 * 1024
MAX_ENV_BYTES = jobenv.ENV_MAX_BYTES
MAX_GPUS_PER_JOB = 64
MAX_TIME_S = 366 * 86400.0
MAX_IDS = 256

Name = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Short = Annotated[str, StringConstraints(max_length=512)]
JobId = Annotated[int, Field(ge=1, le=2**53, strict=True)]
ClaimId = Annotated[int, Field(ge=1, le=2**53, strict=True)]
Seconds = Annotated[float, Field(gt=0, le=MAX_TIME_S, allow_inf_nan=False)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_JOB, strict=True)]
Epoch = Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)]

# Lone surrogates too: valid in JSON ("\\ud800"), but no UTF-8 can store or print them.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""Control, bidi and zero-width characters: never in a name, a note or a request id."""


def plain(value: str, what: str) -> str:
    """``value`` when it has no control, bidi or zero-width characters (else a Refusal)."""
    found = CONTROL.search(value)
    if found:
        raise ValueError(f"{what} contains control character U+{ord(found.group()):04X}")
    return value


class ArgsModel(BaseModel):
    """An op's arguments: unknown keys refused, nothing coerced, frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PlainArgs(ArgsModel):
    """Arguments whose free-text fields (name, pool, host, note, ...) must be ``plain``."""

    @field_validator(
        "name", "pool", "host", "note", "reason", "model", "project", check_fields=False
    )
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return None if value is None else plain(value, "text")


class Empty(ArgsModel):
    pass
