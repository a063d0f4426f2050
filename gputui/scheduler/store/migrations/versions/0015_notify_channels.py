"""Notices in the team's chat: the channels (a user's own, ``gputui notify set``, and
the team channels of hosts.yaml), with their credentials readable only by the head,
and one row per notice per channel once its delivery is settled (sent, given up,
dropped), so a restart resumes what was not sent. ``claim.warned_at``: when its
holder was told it is about to be released (once per idle stretch).

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "notify_channel",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("secret", sa.String(length=256), nullable=True),
        sa.Column("shown", sa.String(length=2048), nullable=False),
        sa.Column("events", sa.String(length=256), nullable=False),
        sa.Column("grp", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_notify_channel_owner", "notify_channel", ["uid", "name"], unique=True)
    op.create_table(
        "notify_sent",
        sa.Column("notice_id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("error", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("notice_id", "channel_id"),
    )
    with op.batch_alter_table("claim") as batch:
        batch.add_column(sa.Column("warned_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("claim") as batch:
        batch.drop_column("warned_at")
    op.drop_table("notify_sent")
    op.drop_index("ix_notify_channel_owner", table_name="notify_channel")
    op.drop_table("notify_channel")
