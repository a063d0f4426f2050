"""The head's health board kept across restarts: each problem's track (first and last
seen, count, whether it shows now) and the admins' acknowledgements.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "healthtrack",
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("host", sa.String(length=64), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=True),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("outside", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_healthtrack")),
    )
    with op.batch_alter_table("healthtrack") as batch:
        batch.create_index(batch.f("ix_healthtrack_last_seen"), ["last_seen"], unique=False)
    op.create_table(
        "healthack",
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("by_uid", sa.Integer(), nullable=False),
        sa.Column("by_user", sa.String(length=64), nullable=False),
        sa.Column("note", sa.String(length=512), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_healthack")),
    )


def downgrade() -> None:
    op.drop_table("healthack")
    with op.batch_alter_table("healthtrack") as batch:
        batch.drop_index(batch.f("ix_healthtrack_last_seen"))
    op.drop_table("healthtrack")
