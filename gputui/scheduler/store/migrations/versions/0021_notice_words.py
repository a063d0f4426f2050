"""A notice's words (``notice.words``): the English template and args its text was
made from, as JSON, for a client to show it in its user's language; null for every
notice before this revision (shown as its English text).

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("notice") as batch:
        batch.add_column(sa.Column("words", sa.String(length=4096), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notice") as batch:
        batch.drop_column("words")
