"""A GPU keeps every fence condition an admin waived, not only the last one.

Revision ID: 0006
Revises: 0005

``gpu.fence_waived`` holds the waived codes, comma-separated (``xid-48,ecc-uncorrected``),
so it widens from 32 to 256 characters; a row's one code reads as a list of one.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.alter_column(
            "fence_waived", type_=sa.String(length=256), existing_type=sa.String(length=32)
        )


def downgrade() -> None:
    # The newest waiver is the one the old column kept.
    op.execute(
        "UPDATE gpu SET fence_waived = substr(fence_waived, length(rtrim(fence_waived,"
        " replace(fence_waived, ',', ''))) + 1) WHERE fence_waived LIKE '%,%'"
    )
    with op.batch_alter_table("gpu") as batch:
        batch.alter_column(
            "fence_waived", type_=sa.String(length=32), existing_type=sa.String(length=256)
        )
