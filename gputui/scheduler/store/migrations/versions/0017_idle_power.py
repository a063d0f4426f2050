"""Held-but-idle GPU time and energy (``power.mode`` report or lock), by hour.

``idleheld``: one row per UTC hour and usage key (user, group, project, pool), as
``usage``: the GPU-seconds and joules of cards held by a job or a claim whose
utilisation read 0 past ``power.idle_minutes`` (a part of that ``usage`` row's
time and energy). The primary key starts with the hour: ``usage`` and ``report``
read a range of hours.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "idleheld",
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("idle_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(
            "hour", "user", "group", "project", "pool", name=op.f("pk_idleheld")
        ),
    )


def downgrade() -> None:
    op.drop_table("idleheld")
