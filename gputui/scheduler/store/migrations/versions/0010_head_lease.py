"""The head's lease (``head_lease``): which of two heads on one PostgreSQL database
leads, and the epoch every write of the leader checks (``store.lease``). One row,
made here at epoch 0, expired; SQLite has the table too (one head per file: unused).
On PostgreSQL a head makes the table itself before it takes the lease (only the
leader migrates), so here it is made only if missing, under the same advisory lock.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


LOCK = 0x67707574_75690002
"""The advisory lock a head makes the table under before it takes the lease
(``store.lease``): the two never race."""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # A head makes this table itself, before it takes the lease and migrates
        # (only the leader migrates): here it may exist already, with its row.
        op.execute(f"SELECT pg_advisory_xact_lock({LOCK:d})")
        op.execute(
            "CREATE TABLE IF NOT EXISTS head_lease (id INTEGER NOT NULL,"
            " epoch BIGINT DEFAULT '0' NOT NULL, holder TEXT NOT NULL,"
            " expires FLOAT DEFAULT '0' NOT NULL, CONSTRAINT pk_head_lease PRIMARY KEY (id))"
        )
        op.execute(
            "INSERT INTO head_lease (id, epoch, holder, expires) VALUES (1, 0, '', 0)"
            " ON CONFLICT (id) DO NOTHING"
        )
        return
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
