"""Slurm's jobs' GPU use and energy, by hour, metered by a head that relays Slurm.

``slurm_energy``: one row per UTC hour and Slurm job id: GPU-seconds held, busy and
energy (J), its user and partition, and whether a share of it was a per-node split
(Slurm named no GPU indexes). The primary key starts with the hour: ``usage`` and
``report`` read a range of hours.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "slurm_energy",
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("job", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("partition", sa.String(length=64), nullable=False),
        sa.Column("held_gpu_s", sa.Float(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.Column("per_node", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("hour", "job", name=op.f("pk_slurm_energy")),
    )


def downgrade() -> None:
    op.drop_table("slurm_energy")
