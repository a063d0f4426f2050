"""Fixtures of the head's tests: a database path on a (pretend) local disk, and the
event loop the head runs on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from gputui.scheduler.store.engine import open_store


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
