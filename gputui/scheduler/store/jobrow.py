"""The job table's columns and each one's default, read from ``tables.Job``: the
submission fast path inserts rows straight on the cursor and shows them without an
ORM object, and both take their columns from here, so a column added to ``Job`` is
written and shown by the fast path too, with the model's own default.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticUndefined
from sqlalchemy import inspect

from gputui.scheduler.store.tables import Job


def _defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column in inspect(Job).columns:
        if column.primary_key:  # the database numbers the row
            continue
        default = Job.model_fields[column.key].default
        out[column.key] = None if default is PydanticUndefined else default
    return out


JOB_DEFAULTS: dict[str, Any] = _defaults()
"""Column -> the value a row that leaves it out gets (None where the model has no
default: a required column, which the database then refuses as NULL)."""
JOB_COLUMNS = tuple(JOB_DEFAULTS)
JOB_NULLABLE: frozenset[str] = frozenset(
    column.key
    for column in inspect(Job).columns
    if column.nullable
    and column.server_default is None
    and not column.primary_key
    and JOB_DEFAULTS[column.key] is None
)
"""Columns that are NULL unless set: nullable, with no default in the model nor in
the database (``test_job_rows`` checks the migrated schema). An insert may leave
such a column out where every row it writes has None there: it is stored NULL all
the same, and each column left out is work SQLite does not do for each row."""


def unknown_columns(row: dict[str, Any]) -> list[str]:
    """Keys of a fast-path row that are no column of ``Job`` (a row must have none)."""
    return [key for key in row if key not in JOB_DEFAULTS and key != "id"]
