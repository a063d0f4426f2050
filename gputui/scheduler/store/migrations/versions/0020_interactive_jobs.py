"""Interactive jobs (``gputui run --pty``): ``job.interactive``, false for every job
before this revision.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("interactive", sa.Boolean(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("interactive")
