"""Bookings: named cards held ahead for a window (``gputui book``).

``booking`` keeps each booking (its cards as a JSON list, its window, its note,
whether it is a maintenance window, its state and the claim made at its start),
indexed by its end so the head reads only those not yet over. ``job.booking_id``:
a job submitted ``--booking ID``; ``claim.booking_id``: the claim a booking became.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "booking",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=False),
        sa.Column("gpu_uuids", sa.Text(), server_default="[]", nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=True),
        sa.Column("start_at", sa.Float(), nullable=False),
        sa.Column("end_at", sa.Float(), nullable=False),
        sa.Column("note", sa.String(length=512), nullable=False),
        sa.Column("maint", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("claim_id", sa.Integer(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("end_reason", sa.String(length=512), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_booking")),
    )
    op.create_index("ix_booking_end", "booking", ["end_at"], unique=False)
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("booking_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("claim") as batch:
        batch.add_column(sa.Column("booking_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("claim") as batch:
        batch.drop_column("booking_id")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("booking_id")
    op.drop_index("ix_booking_end", table_name="booking")
    op.drop_table("booking")
