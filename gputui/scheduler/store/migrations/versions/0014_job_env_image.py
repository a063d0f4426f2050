"""What a job runs in: a Python environment to activate (``job.conda``, ``job.venv``)
and a container (``job.image``, ``job.runtime``, and ``job.container_id``: its run's
container as the host read it). All null for the jobs before this revision, which ran
as a plain command and still do.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("conda", sa.String(length=4096), nullable=True))
        batch.add_column(sa.Column("venv", sa.String(length=4096), nullable=True))
        batch.add_column(sa.Column("image", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("runtime", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("container_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("container_id")
        batch.drop_column("runtime")
        batch.drop_column("image")
        batch.drop_column("venv")
        batch.drop_column("conda")
