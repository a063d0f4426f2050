"""The head's lease (``head_lease``): which of two heads on one PostgreSQL database
leads, and the epoch every write of the leader checks (``store.lease``). One row,
made here at epoch 0, expired; SQLite has the table too (one head per file: unused).

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "head_lease",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("expires", sa.Float(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_head_lease")),
    )
    op.execute("INSERT INTO head_lease (id, epoch, holder, expires) VALUES (1, 0, '', 0)")


def downgrade() -> None:
    op.drop_table("head_lease")
