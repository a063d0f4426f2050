"""Fixtures of the head's store tests: a database path on a (pretend) local disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from gputui.scheduler.engine import open_store


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
