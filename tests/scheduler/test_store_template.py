"""The tests' new stores (``storetemplate``): copies of one migrated template, each
with a jobs namespace of its own and exactly the schema the migrations make."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from storetemplate import Template

from gputui.scheduler.store.engine import jobs_namespace, make_engine, open_store, upgrade


def _schema(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        return [tuple(row) for row in rows]
    finally:
        conn.close()


def test_a_new_store_is_a_copy_with_its_own_namespace_and_the_migrated_schema(
    tmp_path: Path, migrate_once: Template
) -> None:
    copies = migrate_once.copies
    a, b = open_store(tmp_path / "a" / "gputui.db"), open_store(tmp_path / "b" / "gputui.db")
    migrated = make_engine(tmp_path / "c" / "gputui.db")
    (tmp_path / "c").mkdir()
    try:
        assert migrate_once.copies == copies + 2
        assert jobs_namespace(a) != jobs_namespace(b)
        upgrade(migrated)  # by its own name: the real migrations, from nothing
        assert _schema(tmp_path / "a" / "gputui.db") == _schema(tmp_path / "c" / "gputui.db")
    finally:
        for engine in (a, b, migrated):
            engine.dispose()
