"""GPU readings, about one a minute per GPU, kept across head restarts (``gputui
incident``): a table of its own, indexed by host and time (a minute's readings of
one host land together: a flush touches a page a host, not a page a GPU) and by
time (the oldest go first).

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "reading",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=96), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("util", sa.Integer(), nullable=True),
        sa.Column("mem_mib", sa.Integer(), nullable=True),
        sa.Column("temp_c", sa.Integer(), nullable=True),
        sa.Column("power_mw", sa.Integer(), nullable=True),
        sa.Column("throttle", sa.String(length=256), nullable=False),
        sa.Column("ecc_uncorrected", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reading")),
    )
    op.create_index("ix_reading_host", "reading", ["host", "time", "gpu"], unique=False)
    op.create_index("ix_reading_time", "reading", ["time"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_reading_time", table_name="reading")
    op.drop_index("ix_reading_host", table_name="reading")
    op.drop_table("reading")
    op.execute("DELETE FROM meta WHERE key = 'readings_seq'")
