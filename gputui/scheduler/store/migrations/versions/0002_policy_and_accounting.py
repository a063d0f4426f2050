"""Scheduling policy and accounting: job dependencies, quota and idle state; usage by
hour; allocations indexed by end (fair share and quotas read recent ones).

Revision ID: 0002
Revises: 0001

``usage`` is made anew: gputui 0.1 defined it (by day) but never wrote a row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def _usage_by_hour() -> None:
    op.create_table(
        "usage",
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("alloc_gpu_s", sa.Float(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("hour", "user", "group", "project", "pool", name=op.f("pk_usage")),
    )


def upgrade() -> None:
    op.create_table(
        "clusterhour",
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("alloc_gpu_s", sa.Float(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("hour", name=op.f("pk_clusterhour")),
    )
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("after", sa.Text(), server_default="[]", nullable=False))
        batch.add_column(sa.Column("after_ok", sa.Boolean(), server_default="0", nullable=False))
        batch.add_column(sa.Column("over_quota", sa.Boolean(), server_default="0", nullable=False))
        batch.add_column(sa.Column("idle_since", sa.Float(), nullable=True))
        batch.add_column(sa.Column("idle_told", sa.Boolean(), server_default="0", nullable=False))
    op.drop_table("usage")
    _usage_by_hour()
    op.create_index("ix_allocation_end", "allocation", ["end_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_allocation_end", table_name="allocation")
    op.drop_table("usage")
    op.create_table(
        "usage",
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("alloc_gpu_s", sa.Float(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("user", "group", "day", name=op.f("pk_usage")),
    )
    with op.batch_alter_table("job") as batch:
        for column in ("idle_told", "idle_since", "over_quota", "after_ok", "after"):
            batch.drop_column(column)
    op.drop_table("clusterhour")
