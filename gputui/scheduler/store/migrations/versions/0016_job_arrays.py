"""Job arrays and submit scripts.

``job.array_id`` (the id of the array's first task), ``array_task`` (its number in
``--array``) and ``array_throttle`` (``%N``); ``ix_job_array`` finds an array's
waiting tasks without reading the rest of the queue. ``job.script_id`` names the
script copied at submit, kept once in ``job_script`` for all of an array's tasks;
``job.output`` is ``--output``'s pattern.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "job_script",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_script")),
    )
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("array_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("array_task", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("array_throttle", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("script_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output", sa.String(length=4096), nullable=True))
    op.create_index(
        "ix_job_array",
        "job",
        ["array_id", "state"],
        unique=False,
        sqlite_where=sa.text("array_id IS NOT NULL"),
        postgresql_where=sa.text("array_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_array", table_name="job")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("output")
        batch.drop_column("script_id")
        batch.drop_column("array_throttle")
        batch.drop_column("array_task")
        batch.drop_column("array_id")
    op.drop_table("job_script")
