"""Fixtures of the head's tests: a database path on a (pretend) local disk, the
store suite's database on both SQLite and PostgreSQL, and the event loop the head
runs on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from gputui.scheduler.store.engine import open_database, open_store

BACKENDS = ("sqlite", "postgresql")


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Any]:
    """Every async test here runs on uvloop, as ``gputui head`` does (``gputui.cli.head``):
    the daemon is tested on the loop it ships with (uvloop's transports, for one,
    are not asyncio's classes)."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture
def mountinfo(tmp_path: Path) -> Path:
    """A mount table with only a local root: tests do not depend on where tmp_path lives."""
    path = tmp_path / "mountinfo"
    path.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where the head's database goes (its directory does not exist yet)."""
    return tmp_path / "state" / "gputui.db"


@pytest.fixture
def store(db: Path, mountinfo: Path) -> Iterator[Engine]:
    """A database opened the way the head opens it."""
    engine = open_store(db, mountinfo=mountinfo)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database a store-suite test runs on; each test that asks runs on both."""
    name: str = request.param
    return name


@pytest.fixture(scope="session")
def fresh_database(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], Path | str]:
    """Makes a new, empty database each call (for a hypothesis example each): a
    SQLite file's path, or a migrated database emptied on the test process's
    PostgreSQL server (``pgserver``)."""
    if backend == "postgresql":
        server = request.getfixturevalue("pg_server")
        return lambda: str(server.database())
    return lambda: tmp_path_factory.mktemp("db") / "state" / "gputui.db"


@pytest.fixture
def database(backend: str, fresh_database: Callable[[], Path | str], db: Path) -> Path | str:
    """Where a store-suite test's database is: the SQLite file ``db``, or an empty,
    migrated PostgreSQL database."""
    return db if backend == "sqlite" else fresh_database()


@pytest.fixture
def store_on_both(database: Path | str, mountinfo: Path) -> Iterator[Engine]:
    """``store`` on SQLite and on PostgreSQL: a module of the store suite makes it
    its ``store``."""
    engine = open_database(database, mountinfo=mountinfo)
    yield engine
    engine.dispose()
