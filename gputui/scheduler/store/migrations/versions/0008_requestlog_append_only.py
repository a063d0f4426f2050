"""The request log append-only: keyed by an increasing ``seq``, with no index on disk.

Request ids are random, so the primary key (uid, request_id) put each new row on an
index leaf of its own; the ids are now indexed in memory (``store.requestlog``). The
rows are copied in the order they were written, the time index goes with the old table.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "requestlog_new",
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_requestlog")),
    )
    op.execute(
        "INSERT INTO requestlog_new (uid, request_id, time, result)"
        " SELECT uid, request_id, time, result FROM requestlog ORDER BY time, rowid"
    )
    op.drop_index(op.f("ix_requestlog_time"), table_name="requestlog")
    op.drop_table("requestlog")
    op.rename_table("requestlog_new", "requestlog")


def downgrade() -> None:
    op.create_table(
        "requestlog_old",
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("uid", "request_id", name=op.f("pk_requestlog")),
    )
    # The first answer of each id wins, as it did.
    op.execute(
        "INSERT OR IGNORE INTO requestlog_old (uid, request_id, time, result)"
        " SELECT uid, request_id, time, result FROM requestlog ORDER BY seq"
    )
    op.drop_table("requestlog")
    op.rename_table("requestlog_old", "requestlog")
    op.create_index(op.f("ix_requestlog_time"), "requestlog", ["time"], unique=False)
