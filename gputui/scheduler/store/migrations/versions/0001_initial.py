"""The first schema of the head's store: every table of ``tables.py`` as of gputui 0.1.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=False),
        sa.Column("outcome", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit")),
    )
    op.create_index(op.f("ix_audit_time"), "audit", ["time"], unique=False)
    op.create_table(
        "claim",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("wanted", sa.Text(), server_default="[]", nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=True),
        sa.Column("host_constraint", sa.String(length=128), nullable=True),
        sa.Column("note", sa.String(length=512), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("granted_at", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("max_duration_s", sa.Float(), nullable=True),
        sa.Column("idle_release_s", sa.Float(), nullable=False),
        sa.Column("last_active_at", sa.Float(), nullable=True),
        sa.Column("released_at", sa.Float(), nullable=True),
        sa.Column("release_reason", sa.String(length=512), nullable=True),
        sa.Column("session", sa.String(length=64), nullable=True),
        sa.Column("host", sa.String(length=128), nullable=True),
        sa.Column("gpu_uuids", sa.Text(), server_default="[]", nullable=False),
        sa.Column("project", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_claim")),
    )
    op.create_index("ix_claim_state", "claim", ["state"], unique=False)
    op.create_table(
        "gpu",
        sa.Column("uuid", sa.String(length=96), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_by", sa.String(length=64), nullable=True),
        sa.Column("state_reason", sa.String(length=512), nullable=True),
        sa.Column("state_at", sa.Float(), nullable=True),
        sa.Column("present", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("uuid", name=op.f("pk_gpu")),
    )
    op.create_index(op.f("ix_gpu_host"), "gpu", ["host"], unique=False)
    op.create_table(
        "host",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_by", sa.String(length=64), nullable=True),
        sa.Column("state_reason", sa.String(length=512), nullable=True),
        sa.Column("state_at", sa.Float(), nullable=True),
        sa.Column("last_seen", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_host")),
    )
    op.create_table(
        "job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("argv", sa.Text(), nullable=False),
        sa.Column("cwd", sa.String(length=4096), nullable=True),
        sa.Column("env", sa.Text(), server_default="{}", nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=True),
        sa.Column("host_constraint", sa.String(length=128), nullable=True),
        sa.Column("priority", sa.String(length=32), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("time_limit_s", sa.Float(), nullable=True),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_signal", sa.String(length=16), nullable=True),
        sa.Column("requeues", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=True),
        sa.Column("gpu_uuids", sa.Text(), server_default="[]", nullable=False),
        sa.Column("log_path", sa.String(length=4096), nullable=True),
        sa.Column("run_as", sa.String(length=64), nullable=True),
        sa.Column("launches", sa.Integer(), nullable=False),
        sa.Column("stop_deadline", sa.Float(), nullable=True),
        sa.Column("stop_kind", sa.String(length=16), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("project", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_job_state", "job", ["state"], unique=False)
    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_meta")),
    )
    op.create_table(
        "notice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("text", sa.String(length=512), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("claim_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notice")),
    )
    op.create_index(op.f("ix_notice_uid"), "notice", ["uid"], unique=False)
    op.create_table(
        "requestlog",
        sa.Column("uid", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("uid", "request_id", name=op.f("pk_requestlog")),
    )
    op.create_index(op.f("ix_requestlog_time"), "requestlog", ["time"], unique=False)
    op.create_table(
        "usage",
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("alloc_gpu_s", sa.Float(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("user", "group", "day", name=op.f("pk_usage")),
    )
    op.create_table(
        "allocation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("claim_id", sa.Integer(), nullable=True),
        sa.Column("start_at", sa.Float(), nullable=False),
        sa.Column("end_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["claim_id"], ["claim.id"], name=op.f("fk_allocation_claim_id_claim")
        ),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], name=op.f("fk_allocation_job_id_job")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocation")),
    )
    op.create_index("ix_allocation_claim", "allocation", ["claim_id"], unique=False)
    op.create_index("ix_allocation_job", "allocation", ["job_id"], unique=False)
    op.create_index(
        "ux_allocation_live_gpu",
        "allocation",
        ["gpu_uuid"],
        unique=True,
        sqlite_where=sa.text("end_at IS NULL"),
        postgresql_where=sa.text("end_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ux_allocation_live_gpu",
        table_name="allocation",
        sqlite_where=sa.text("end_at IS NULL"),
        postgresql_where=sa.text("end_at IS NULL"),
    )
    op.drop_index("ix_allocation_job", table_name="allocation")
    op.drop_index("ix_allocation_claim", table_name="allocation")
    op.drop_table("allocation")
    op.drop_table("usage")
    op.drop_index(op.f("ix_requestlog_time"), table_name="requestlog")
    op.drop_table("requestlog")
    op.drop_index(op.f("ix_notice_uid"), table_name="notice")
    op.drop_table("notice")
    op.drop_table("meta")
    op.drop_index("ix_job_state", table_name="job")
    op.drop_table("job")
    op.drop_table("host")
    op.drop_index(op.f("ix_gpu_host"), table_name="gpu")
    op.drop_table("gpu")
    op.drop_index("ix_claim_state", table_name="claim")
    op.drop_table("claim")
    op.drop_index(op.f("ix_audit_time"), table_name="audit")
    op.drop_table("audit")
