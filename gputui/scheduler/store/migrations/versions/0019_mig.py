"""MIG slices: a slice is a GPU row of its own (``gpu.mig_profile``, ``gpu.mig_parent``:
its profile and its card's UUID), a card with MIG mode on is marked
(``gpu.mig_enabled``: never placed whole), and jobs and claims may ask for a profile
(``job.mig``, ``claim.mig``). Null and false for everything before this revision,
which is what they were: whole cards, asked for as whole cards.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.add_column(sa.Column("mig_profile", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("mig_parent", sa.String(length=96), nullable=True))
        batch.add_column(sa.Column("mig_enabled", sa.Boolean(), server_default="0", nullable=False))
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("mig", sa.String(length=32), nullable=True))
    with op.batch_alter_table("claim") as batch:
        batch.add_column(sa.Column("mig", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("claim") as batch:
        batch.drop_column("mig")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("mig")
    with op.batch_alter_table("gpu") as batch:
        batch.drop_column("mig_enabled")
        batch.drop_column("mig_parent")
        batch.drop_column("mig_profile")
