"""Migrations and tables cannot drift apart, and an older database upgrades in place."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlmodel import SQLModel

from gputui.scheduler.store.api import StoreError
from gputui.scheduler.store.engine import MIGRATIONS, alembic_config, make_engine, upgrade

HEAD = "0021"
"""The newest revision gputui ships."""

REVISION_0900 = '''"""Add a column to job and one to host (a test's revision, not gputui's).

Revision ID: 0900
Revises: HEAD_HERE
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0900"
down_revision = "HEAD_HERE"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # recreate="always": SQLite copies the table, as it must for most changes; job is
    # referenced by allocation rows, which must survive the copy.
    with op.batch_alter_table("job", recreate="always") as batch:
        batch.add_column(sa.Column("comment", sa.String(128), nullable=True))
    op.add_column("host", sa.Column("rack", sa.String(32), nullable=False, server_default="r0"))
    FAIL_HERE


def downgrade() -> None:
    with op.batch_alter_table("host") as batch:
        batch.drop_column("rack")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("comment")
'''


def scratch_migrations(tmp_path: Path, fail: bool = False) -> Path:
    """A copy of gputui's migrations plus a revision 0900 (optionally failing at its end)."""
    target = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
    body = REVISION_0900.replace(
        "    FAIL_HERE\n", '    raise RuntimeError("half-way")\n' if fail else ""
    ).replace("HEAD_HERE", HEAD)
    (target / "versions" / "0900_comment.py").write_text(body)
    return target


def migrations_up_to(tmp_path: Path, last: str) -> Path:
    """A copy of gputui's migrations without the revisions after ``last``."""
    target = tmp_path / f"migrations-{last}"
    shutil.copytree(MIGRATIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (target / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"):
        if path.name[:4] > last:
            path.unlink()
    return target


def _at_0001(db: Path, tmp_path: Path) -> Engine:
    """A database as gputui 0.1 left it: schema 0001 and some rows that reference others
    (written in SQL: today's models have columns 0001 lacks)."""
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0001"))) == "0001"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO host (name, pool, state) VALUES ('gpu1', 'default', 'ok')"
        )
        conn.exec_driver_sql(
            'INSERT INTO job (id, uid, user, "group", name, argv, env, gpus, priority,'
            " preemptible, submitted_at, state, reason, requeues, gpu_uuids, launches)"
            " VALUES (1, 1000, 'ana', '', '', '[\"train.py\"]', '{}', 1, 'normal', 0, 1.0,"
            " 'queued', '', 0, '[]', 0)"
        )
        conn.exec_driver_sql(
            'INSERT INTO claim (id, uid, user, "group", gpus, wanted, note, state, reason,'
            " created_at, idle_release_s, gpu_uuids) VALUES (1, 1000, 'ana', '', 1, '[]', '',"
            " 'waiting', '', 1.0, 1800, '[]')"
        )
        conn.exec_driver_sql(
            "INSERT INTO allocation (gpu_uuid, host, job_id, start_at)"
            " VALUES ('GPU-a', 'gpu1', 1, 2.0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO allocation (gpu_uuid, host, claim_id, start_at)"
            " VALUES ('GPU-b', 'gpu1', 1, 2.0)"
        )
    return engine


def test_migrated_schema_is_exactly_the_tables(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "fresh.db")
    assert upgrade(engine) == HEAD
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        assert compare_metadata(context, SQLModel.metadata) == []
        # What autogenerate does not compare: the partial index's WHERE, AUTOINCREMENT.
        rows = conn.execute(text("SELECT name, sql FROM sqlite_master")).all()
        schema = dict(rows)
        assert schema["ux_allocation_live_gpu"] == (
            "CREATE UNIQUE INDEX ux_allocation_live_gpu ON allocation (gpu_uuid) "
            "WHERE end_at IS NULL"
        )
        assert "AUTOINCREMENT" in schema["job"]
        assert "CONSTRAINT fk_allocation_job_id_job FOREIGN KEY" in schema["allocation"]
        assert set(inspect(conn).get_table_names()) == {
            *SQLModel.metadata.tables,
            "alembic_version",
        }
    engine.dispose()


def test_drift_is_noticed(tmp_path: Path) -> None:
    """The comparison above can fail: a column the migrations lack shows up."""
    engine = make_engine(tmp_path / "fresh.db")
    upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE job DROP COLUMN project")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert [(op[0], op[3].name) for op in diff] == [("add_column", "project")]
    engine.dispose()


def test_an_older_database_upgrades_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    _at_0001(db, tmp_path).dispose()
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(scratch_migrations(tmp_path))) == "0900"
    with engine.connect() as conn:
        assert "comment" in {c["name"] for c in inspect(conn).get_columns("job")}
        # 0002's new job columns have their defaults on the old row.
        assert conn.exec_driver_sql("SELECT after, after_ok, over_quota FROM job").all() == [
            ("[]", 0, 0)
        ]
        assert conn.exec_driver_sql("SELECT name, rack FROM host").all() == [("gpu1", "r0")]
        assert conn.exec_driver_sql(
            "SELECT a.gpu_uuid, j.user FROM allocation a JOIN job j ON j.id = a.job_id"
        ).all() == [("GPU-a", "ana")]
        assert conn.exec_driver_sql("SELECT count(*) FROM allocation").scalar() == 2
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1  # back on
        # The copied job table is still the one allocation's foreign key points at.
        conn.rollback()
    with pytest.raises(Exception, match="FOREIGN KEY constraint failed"), engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO allocation (gpu_uuid, host, job_id, start_at) VALUES ('g', 'h', 99, 1)"
        )
    # This gputui (which knows only up to HEAD) now refuses the file instead of damaging it.
    with pytest.raises(StoreError, match=r"written by a newer gputui \(schema 0900\)"):
        upgrade(engine)
    engine.dispose()


def test_a_failing_upgrade_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    _at_0001(db, tmp_path).dispose()
    engine = make_engine(db)
    with pytest.raises(StoreError) as error:
        upgrade(engine, alembic_config(scratch_migrations(tmp_path, fail=True)))
    assert str(error.value) == f"cannot upgrade database {db}: half-way"
    with engine.connect() as conn:
        assert "comment" not in {c["name"] for c in inspect(conn).get_columns("job")}
        assert "rack" not in {c["name"] for c in inspect(conn).get_columns("host")}
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == [("0001",)]
        assert conn.exec_driver_sql("SELECT count(*) FROM allocation").scalar() == 2
        conn.rollback()
    assert upgrade(engine) == HEAD
    engine.dispose()


def test_the_developer_command_line_path(tmp_path: Path) -> None:
    """``alembic -c …/alembic.ini -x db=PATH``: upgrade, autogenerate finds nothing, downgrade."""
    db = tmp_path / "dev.db"
    cfg = alembic_config()
    cfg.cmd_opts = argparse.Namespace(x=[f"db={db}"])
    command.upgrade(cfg, "head")
    command.check(cfg)  # raises when autogenerate would write a new revision
    command.downgrade(cfg, "base")
    engine = make_engine(db)
    with engine.connect() as conn:
        assert inspect(conn).get_table_names() == ["alembic_version"]
    engine.dispose()
    assert (MIGRATIONS / "alembic.ini").is_file() and (MIGRATIONS / "script.py.mako").is_file()


def test_0003_moves_drained_and_unhealthy_rows_into_drains_and_fences(tmp_path: Path) -> None:
    """A 0002 file with a drained host, a drained GPU and an unhealthy one: after the
    upgrade each is a drain or a fence with its who, why and since when; and back."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0002"))) == "0002"
    gpu = 'INSERT INTO gpu (uuid, host, "index", model, memory_mib, pool, state, state_by,'
    gpu += " state_reason, state_at, present) VALUES (?, 'gpu1', ?, 'A100', 0, 'p', ?, ?, ?, ?, 1)"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO host (name, pool, state, state_by, state_reason, state_at)"
            " VALUES ('gpu1', 'p', 'drained', 'carol', 'rack work', 5.0), ('gpu2', 'p', 'ok',"
            " NULL, NULL, NULL)"
        )
        conn.exec_driver_sql(gpu, ("GPU-a", 0, "drained", "carol", "fan noise", 7.0))
        conn.exec_driver_sql(gpu, ("GPU-b", 1, "unhealthy", "gputui-head", "Xid 79", 8.0))
        conn.exec_driver_sql(gpu, ("GPU-c", 2, "ok", None, None, None))
        conn.exec_driver_sql(gpu, ("GPU-d", 3, "drained", None, None, None))
    assert upgrade(engine) == HEAD
    with engine.connect() as conn:
        assert "state" not in {c["name"] for c in inspect(conn).get_columns("gpu")}
        assert conn.exec_driver_sql(
            "SELECT name, drained_by, drain_reason, drained_at FROM host ORDER BY name"
        ).all() == [("gpu1", "carol", "rack work", 5.0), ("gpu2", None, None, None)]
        assert conn.exec_driver_sql(
            "SELECT uuid, drained_by, drain_reason, drained_at, fence_code, fence_reason,"
            " fenced_at, fence_clears FROM gpu ORDER BY uuid"
        ).all() == [
            ("GPU-a", "carol", "fan noise", 7.0, None, None, None, None),
            ("GPU-b", None, None, None, "unhealthy", "Xid 79", 8.0, "condition"),
            ("GPU-c", None, None, None, None, None, None, None),
            ("GPU-d", "unknown", "", 0.0, None, None, None, None),  # drained since "ever"
        ]
        conn.rollback()
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT uuid, state FROM gpu ORDER BY uuid").all() == [
            ("GPU-a", "drained"),
            ("GPU-b", "unhealthy"),
            ("GPU-c", "ok"),
            ("GPU-d", "drained"),
        ]
        assert conn.exec_driver_sql("SELECT name, state, state_by FROM host").all() == [
            ("gpu1", "drained", "carol"),
            ("gpu2", "ok", None),
        ]
        conn.rollback()
    engine.dispose()


def test_0004_adds_the_health_board_and_takes_it_away_again(tmp_path: Path) -> None:
    """A 0003 file keeps its rows; 0004 adds the tracks and acks (empty), and a
    downgrade to 0003 drops them and nothing else."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0003"))) == "0003"
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO host (name, pool) VALUES ('gpu1', 'p')")
    assert upgrade(engine) == HEAD
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT name FROM host").all() == [("gpu1",)]
        conn.exec_driver_sql(
            "INSERT INTO healthtrack (key, host, gpu, code, first_seen, last_seen, count,"
            " active, outside) VALUES ('gpu1:0:xid-79', 'gpu1', 0, 'xid-79', 1, 2, 3, 1, 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO healthack (key, by_uid, by_user, note, at, fingerprint)"
            " VALUES ('gpu1:0:xid-79', 0, 'root', 'RMA', 2, '[\"crit\", \"\", 3]')"
        )
        names = {i["name"] for i in inspect(conn).get_indexes("healthtrack")}
        assert names == {"ix_healthtrack_last_seen"}
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        assert "healthtrack" not in tables and "healthack" not in tables
        assert conn.exec_driver_sql("SELECT name FROM host").all() == [("gpu1",)]
        conn.rollback()
    engine.dispose()


def test_the_readings_revision_adds_its_table_and_takes_it_away_again(tmp_path: Path) -> None:
    """A file at the revision before (the newest's parent) keeps its rows and gains an
    empty ``reading`` table the head can write to; downgraded, the table and its
    sequence number in ``meta`` go."""
    parent = "0004"
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, parent))) == parent
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO host (name, pool) VALUES ('gpu1', 'p')")
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path / "r", "0005"))) == "0005"
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT name FROM host").all() == [("gpu1",)]
        assert conn.exec_driver_sql("SELECT count(*) FROM reading").scalar() == 0
        conn.exec_driver_sql(
            "INSERT INTO reading (id, host, gpu, uuid, time, state, throttle)"
            " VALUES (1, 'gpu1', 0, 'GPU-a', 5.0, 'ok', '')"
        )
        conn.exec_driver_sql("INSERT INTO meta (key, value) VALUES ('readings_seq', '1')")
        indexes = {i["name"] for i in inspect(conn).get_indexes("reading")}
        assert indexes == {"ix_reading_host", "ix_reading_time"}
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, parent)
    with engine.connect() as conn:
        assert "reading" not in inspect(conn).get_table_names()
        assert conn.exec_driver_sql("SELECT key FROM meta").all() == []
        assert conn.exec_driver_sql("SELECT name FROM host").all() == [("gpu1",)]
        conn.rollback()
    engine.dispose()


def test_0006_keeps_a_waiver_and_widens_it_to_a_list(tmp_path: Path) -> None:
    """A 0005 file's one waived code reads as a list of one; downgraded, a GPU with
    several keeps the newest (what the old column meant)."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0005"))) == "0005"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            'INSERT INTO gpu (uuid, host, "index", model, memory_mib, pool, present,'
            " fence_waived, fence_waived_at)"
            " VALUES ('GPU-a', 'gpu1', 0, '', 0, 'p', 1, 'xid-48', 5)"
        )
    assert upgrade(engine) == HEAD
    long_list = "xid-48,ecc-uncorrected,remap-failed,nvlink-down,fabric"
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT fence_waived FROM gpu").all() == [("xid-48",)]
        conn.exec_driver_sql(f"UPDATE gpu SET fence_waived = '{long_list}'")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT fence_waived, fence_waived_at FROM gpu").all() == [
            ("fabric", 5.0)
        ]
        conn.rollback()
    engine.dispose()


def test_0007_keeps_notices_until_read_and_a_jobs_last_preemption(tmp_path: Path) -> None:
    """A file at 0006 keeps its notices (all unread) and jobs; downgraded, the new
    columns and index go and the rows stay."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0006"))) == "0006"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO notice (id, uid, time, kind, text) VALUES (1, 1000, 5.0, 'ended', 'x')"
        )
    assert upgrade(engine) == HEAD
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT id, read_at FROM notice").all() == [(1, None)]
        assert "ix_notice_unread" in {i["name"] for i in inspect(conn).get_indexes("notice")}
        job_columns = {c["name"] for c in inspect(conn).get_columns("job")}
        assert {"preempted_by", "preempted_at"} <= job_columns
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0006")
    with engine.connect() as conn:
        assert "read_at" not in {c["name"] for c in inspect(conn).get_columns("notice")}
        assert "preempted_by" not in {c["name"] for c in inspect(conn).get_columns("job")}
        assert conn.exec_driver_sql("SELECT id FROM notice").all() == [(1,)]
        conn.rollback()
    engine.dispose()


def test_0008_keeps_the_request_log_in_order_without_its_disk_index(tmp_path: Path) -> None:
    """A file at 0007 keeps every logged answer, numbered in the order they were
    written; the key on (uid, request_id) and the time index go. Downgraded, the rows
    come back under the old key."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0007"))) == "0007"
    with engine.begin() as conn:
        for uid, rid, when in ((1000, "b", 2.0), (1000, "a", 1.0), (1001, "a", 3.0)):
            conn.exec_driver_sql(
                "INSERT INTO requestlog (uid, request_id, time, result)"
                f" VALUES ({uid}, '{rid}', {when}, '{{}}')"
            )
    assert upgrade(engine) == HEAD
    with engine.begin() as conn:
        rows = conn.exec_driver_sql("SELECT seq, uid, request_id FROM requestlog ORDER BY seq")
        assert rows.all() == [(1, 1000, "a"), (2, 1000, "b"), (3, 1001, "a")]
        assert inspect(conn).get_indexes("requestlog") == []
        assert inspect(conn).get_pk_constraint("requestlog")["constrained_columns"] == ["seq"]
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0007")
    with engine.connect() as conn:
        pk = inspect(conn).get_pk_constraint("requestlog")["constrained_columns"]
        assert pk == ["uid", "request_id"]
        assert conn.exec_driver_sql("SELECT count(*) FROM requestlog").scalar() == 3
        conn.rollback()
    engine.dispose()


def test_0009_gives_each_job_its_gpu_hours_and_marks_older_runs_unmetered(
    tmp_path: Path,
) -> None:
    """A file at 0008: each job's allocated GPU-seconds are summed from its ended
    allocations; a job that ever ran has unknown (null) busy time and energy, one
    still queued starts at 0. Downgraded, the columns and the index go, the rows stay."""
    db = tmp_path / "old.db"
    engine = make_engine(db)
    assert upgrade(engine, alembic_config(migrations_up_to(tmp_path, "0008"))) == "0008"
    with engine.begin() as conn:
        for job_id, state, started in ((1, "completed", 10.0), (2, "queued", "NULL")):
            conn.exec_driver_sql(
                'INSERT INTO job (id, uid, user, "group", name, argv, env, gpus, priority,'
                " preemptible, submitted_at, started_at, state, reason, requeues, gpu_uuids,"
                f" launches) VALUES ({job_id}, 1000, 'ana', '', '', '[]', '{{}}', 2, 'normal',"
                f" 0, 1.0, {started}, '{state}', '', 1, '[]', 2)"
            )
        for uuid, start, end in (
            ("GPU-a", 10.0, 70.0),
            ("GPU-b", 10.0, 40.0),
            ("GPU-a", 100.0, 130.0),
        ):
            conn.exec_driver_sql(
                "INSERT INTO allocation (gpu_uuid, host, job_id, start_at, end_at)"
                f" VALUES ('{uuid}', 'gpu1', 1, {start}, {end})"
            )
    assert upgrade(engine) == HEAD
    with engine.begin() as conn:
        rows = conn.exec_driver_sql(
            "SELECT id, alloc_gpu_s, busy_gpu_s, energy_j FROM job ORDER BY id"
        ).all()
        assert rows == [(1, 120.0, None, None), (2, 0.0, 0.0, 0.0)]
        assert "ix_job_ended" in {i["name"] for i in inspect(conn).get_indexes("job")}
    cfg = alembic_config()
    with engine.connect() as conn:
        # As upgrade() does: the copy of job would fire allocation's foreign key.
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA foreign_keys = OFF")
        with conn.begin():
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("job")}
        assert not columns & {"alloc_gpu_s", "busy_gpu_s", "energy_j"}
        assert "ix_job_ended" not in {i["name"] for i in inspect(conn).get_indexes("job")}
        assert conn.exec_driver_sql("SELECT count(*) FROM job").scalar() == 2
        conn.rollback()
    engine.dispose()
