"""``SqliteStore``: the name the head's store had while SQLite was its only database;
the store is ``sqlstore.SqlStore``, on SQLite or PostgreSQL alike."""

from __future__ import annotations

from gputui.scheduler.store.sqlstore import SqlStore

SqliteStore = SqlStore
