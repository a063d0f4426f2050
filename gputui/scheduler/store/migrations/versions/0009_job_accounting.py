"""Each job's own GPU-hours, busy time and energy (``gputui history``).

``job.alloc_gpu_s``: GPU-seconds allocated over all its runs, added as each run's
allocations end; filled here from the allocations already ended. ``job.busy_gpu_s``
and ``job.energy_j``: what the meter counted on its GPUs while they were its; null
for a job that started before this revision (never metered per job: unknown, not
zero). ``ix_job_ended``: the finished jobs by end time, for ``history``'s range.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

# One allocation counts for at most 400 days (``policy.accounting.MAX_SPAN_S``).


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("alloc_gpu_s", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("busy_gpu_s", sa.Float(), nullable=True, server_default="0"))
        batch.add_column(sa.Column("energy_j", sa.Float(), nullable=True, server_default="0"))
    least = "MIN" if op.get_bind().dialect.name == "sqlite" else "LEAST"  # of two values
    op.execute(
        f"UPDATE job SET alloc_gpu_s = (SELECT COALESCE(SUM({least}(a.end_at - a.start_at,"  # noqa: S608
        " 34560000.0)), 0) FROM allocation a WHERE a.job_id = job.id"
        " AND a.end_at > a.start_at)"
    )
    op.execute(
        "UPDATE job SET busy_gpu_s = NULL, energy_j = NULL WHERE started_at IS NOT NULL"
        " OR EXISTS (SELECT 1 FROM allocation a WHERE a.job_id = job.id)"
    )
    op.create_index(
        "ix_job_ended",
        "job",
        ["ended_at"],
        unique=False,
        sqlite_where=sa.text("ended_at IS NOT NULL"),
        postgresql_where=sa.text("ended_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_ended", table_name="job")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("energy_j")
        batch.drop_column("busy_gpu_s")
        batch.drop_column("alloc_gpu_s")
