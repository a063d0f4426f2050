"""The migrations on both databases: SQLite (the default) and a real PostgreSQL server.

``test_migrations`` tests each revision on SQLite in detail (its table copies, its
foreign keys, its pragmas); here the same revisions run on both, and must leave
exactly the tables' schema, down to the first revision and back up again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect
from sqlmodel import SQLModel

from gputui.scheduler.store.engine import alembic_config, make_engine, upgrade

HEAD = "0021"


@pytest.fixture
def empty(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """An engine on a database with no schema at all."""
    if backend == "sqlite":
        return make_engine(tmp_path / "fresh.db")
    return make_engine(request.getfixturevalue("pg_server").database(migrated=False))


def _drift(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, SQLModel.metadata))


def test_the_migrated_schema_is_exactly_the_tables(empty: Engine) -> None:
    assert upgrade(empty) == HEAD
    assert _drift(empty) == []
    with empty.connect() as conn:
        assert set(inspect(conn).get_table_names()) == {
            *SQLModel.metadata.tables,
            "alembic_version",
        }
    empty.dispose()


def test_every_revision_goes_down_and_up_again(empty: Engine) -> None:
    upgrade(empty)
    cfg = alembic_config()
    with empty.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0001")
        conn.commit()
        assert MigrationContext.configure(conn).get_current_heads() == ("0001",)
        assert "requestlog" in inspect(conn).get_table_names()
    cfg.attributes.pop("connection")
    assert upgrade(empty) == HEAD
    assert _drift(empty) == []
    empty.dispose()


def test_0010_makes_the_head_lease_expired_at_epoch_0(empty: Engine) -> None:
    """One row, free to take: the first head to start leads at epoch 1."""
    upgrade(empty)
    with empty.connect() as conn:
        rows = conn.exec_driver_sql("SELECT id, epoch, holder, expires FROM head_lease").all()
    assert [tuple(r) for r in rows] == [(1, 0, "", 0.0)]
    empty.dispose()
