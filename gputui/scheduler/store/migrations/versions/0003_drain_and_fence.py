"""Drain and fence kept apart: an admin's drain (host or GPU) and the head's own fence
(GPU) each get who, why and since when, in columns of their own.

Revision ID: 0003
Revises: 0002

The one ``state`` column (ok / drained / unhealthy) and its by/reason/at go: a
``drained`` row becomes a drain, an ``unhealthy`` one a fence (code ``unhealthy``,
lifted when a sample no longer shows a fencing condition).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_DRAIN = (
    ("drained_by", sa.String(length=64)),
    ("drain_reason", sa.String(length=512)),
    ("drained_at", sa.Float()),
)
_FENCE = (
    ("fence_code", sa.String(length=32)),
    ("fence_reason", sa.String(length=512)),
    ("fenced_at", sa.Float()),
    ("fence_clears", sa.String(length=16)),
    ("fence_waived", sa.String(length=32)),
    ("fence_waived_at", sa.Float()),
)
_STATE = (
    ("state_by", sa.String(length=64)),
    ("state_reason", sa.String(length=512)),
    ("state_at", sa.Float()),
)
# A drain or fence of unknown time counts from the epoch: set, but since "ever".
_TO_DRAIN = (
    "UPDATE {table} SET drained_by = coalesce(state_by, 'unknown'),"
    " drain_reason = coalesce(state_reason, ''), drained_at = coalesce(state_at, 0)"
    " WHERE state = 'drained'"
)
_TO_FENCE = (
    "UPDATE gpu SET fence_code = 'unhealthy',"
    " fence_reason = coalesce(state_reason, 'unhealthy (found before gputui kept fences apart)'),"
    " fenced_at = coalesce(state_at, 0), fence_clears = 'condition' WHERE state = 'unhealthy'"
)


def upgrade() -> None:
    for table, extra in (("host", ()), ("gpu", _FENCE)):
        with op.batch_alter_table(table) as batch:
            for name, kind in (*_DRAIN, *extra):
                batch.add_column(sa.Column(name, kind, nullable=True))
    op.execute(_TO_DRAIN.format(table="host"))
    op.execute(_TO_DRAIN.format(table="gpu"))
    op.execute(_TO_FENCE)
    for table in ("host", "gpu"):
        with op.batch_alter_table(table) as batch:
            for name in ("state", *(n for n, _ in _STATE)):
                batch.drop_column(name)


def downgrade() -> None:
    for table in ("host", "gpu"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("state", sa.String(length=16), nullable=False, server_default="ok")
            )
            for name, kind in _STATE:
                batch.add_column(sa.Column(name, kind, nullable=True))
    # A fence outranks a drain in the one column there was.
    op.execute(
        "UPDATE host SET state = 'drained', state_by = drained_by, state_reason = drain_reason,"
        " state_at = drained_at WHERE drained_at IS NOT NULL"
    )
    op.execute(
        "UPDATE gpu SET state = 'drained', state_by = drained_by, state_reason = drain_reason,"
        " state_at = drained_at WHERE drained_at IS NOT NULL"
    )
    op.execute(
        "UPDATE gpu SET state = 'unhealthy', state_by = 'gputui-head',"
        " state_reason = fence_reason, state_at = fenced_at WHERE fence_code IS NOT NULL"
    )
    for table, extra in (("host", ()), ("gpu", _FENCE)):
        with op.batch_alter_table(table) as batch:
            for name, _ in (*_DRAIN, *extra):
                batch.drop_column(name)
