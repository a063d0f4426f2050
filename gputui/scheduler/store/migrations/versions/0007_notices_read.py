"""Notices kept until read (``gputui notices``, the console on connecting), and the
last preemption of a job kept on its row (``gputui show``).

``notice.read_at``: when its user was shown it (null: unread), indexed with the
uid so a connection finds its user's unread notices in one range. ``job.
preempted_by`` / ``preempted_at``: why and when its last run was preempted (its
reason is overwritten by the next wait reason).

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("notice") as batch:
        batch.add_column(sa.Column("read_at", sa.Float(), nullable=True))
    op.create_index("ix_notice_unread", "notice", ["uid", "read_at"], unique=False)
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("preempted_by", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("preempted_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("preempted_at")
        batch.drop_column("preempted_by")
    op.drop_index("ix_notice_unread", table_name="notice")
    with op.batch_alter_table("notice") as batch:
        batch.drop_column("read_at")
