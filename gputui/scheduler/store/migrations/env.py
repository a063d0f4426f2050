"""Alembic's environment for the head's store.

``engine.upgrade`` hands over its open connection (already inside ``BEGIN IMMEDIATE``)
through ``config.attributes["connection"]``, so the whole upgrade is one transaction.
The alembic command line (a developer writing the next revision) passes a database
instead: ``alembic -c gputui/scheduler/store/migrations/alembic.ini -x db=PATH …``.
No logging configuration happens here: the head owns its logging.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from gputui.scheduler.store import tables  # noqa: F401  (registers the tables on SQLModel.metadata)


def _migrate(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        # SQLite alters a table by copying it; batch mode does that for us.
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run() -> None:
    if context.is_offline_mode():
        raise SystemExit("gputui migrations run online only (no --sql)")
    given = context.config.attributes.get("connection")
    if isinstance(given, Connection):
        _migrate(given)
        return
    from gputui.scheduler.store.engine import make_engine

    target = context.get_x_argument(as_dictionary=True).get("db")
    if not target:
        raise SystemExit("name the database: alembic … -x db=PATH_OR_URL")
    engine = make_engine(target)
    try:
        with engine.connect() as connection:
            _migrate(connection)
            connection.commit()
    finally:
        engine.dispose()


_run()
