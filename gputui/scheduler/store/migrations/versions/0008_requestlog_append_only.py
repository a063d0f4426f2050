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


def _free_pk_name() -> None:
    """PostgreSQL names constraints per schema, not per table: the table being
    replaced gives its key's name up for the new one (SQLite needs nothing)."""
    if op.get_bind().dialect.name != "sqlite":
        op.execute("ALTER TABLE requestlog RENAME CONSTRAINT pk_requestlog TO pk_requestlog_gone")


def upgrade() -> None:
    _free_pk_name()
    op.create_table(
        "requestlog_new",
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_requestlog")),
    )
    # (rowid: SQLite's order of insertion; PostgreSQL has none, and no log before 0008.)
    order = "time, rowid" if op.get_bind().dialect.name == "sqlite" else "time"
    op.execute(
        "INSERT INTO requestlog_new (uid, request_id, time, result)"  # noqa: S608
        f" SELECT uid, request_id, time, result FROM requestlog ORDER BY {order}"
    )
    op.drop_index(op.f("ix_requestlog_time"), table_name="requestlog")
    op.drop_table("requestlog")
    op.rename_table("requestlog_new", "requestlog")


def downgrade() -> None:
    _free_pk_name()
    op.create_table(
        "requestlog_old",
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("uid", "request_id", name=op.f("pk_requestlog")),
    )
    # The first answer of each id wins, as it did.
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.execute(
        f"INSERT {'OR IGNORE ' if sqlite else ''}INTO requestlog_old"  # noqa: S608
        " (uid, request_id, time, result) SELECT uid, request_id, time, result"
        f" FROM requestlog ORDER BY seq{'' if sqlite else ' ON CONFLICT DO NOTHING'}"
    )
    op.drop_table("requestlog")
    op.rename_table("requestlog_old", "requestlog")
    op.create_index(op.f("ix_requestlog_time"), "requestlog", ["time"], unique=False)
