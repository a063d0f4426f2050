"""A new store's schema, migrated once per test process and copied per store.

``open_store`` on a new (empty) file runs every Alembic migration, about a tenth of
a second each time; the tests open hundreds of new stores (one per hypothesis
example in some). ``migrate_once`` puts a step in front of ``engine.upgrade``: a
new, empty SQLite file with the shipped migrations is first made a copy of a
template, a file the real ``upgrade`` brought to the newest schema once in this
process. The real ``upgrade`` then runs on it as on any database at the newest
revision (the checks, the foreign keys, the revision it returns). Nothing else
changes: a file with anything in it, another set of migrations, or a call to
``upgrade`` by its own name (``test_migrations`` and ``test_engine`` test the
migrations themselves that way) take the real path. The template holds the schema
only: ``open_store`` gives each copy its own jobs namespace afterwards.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Upgrade = Callable[..., str]


class Template:
    def __init__(self, directory: Path, engine_module: Any) -> None:
        self.path = directory / "gputui.db"
        self.engine_module = engine_module
        self.real: Upgrade = engine_module.upgrade
        self.copies = 0

    def _made(self) -> Path:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            engine = self.engine_module.make_engine(self.path)
            try:
                self.real(engine)
                raw = engine.raw_connection()
                try:
                    raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    raw.close()
            finally:
                engine.dispose()
            wal = Path(f"{self.path}-wal")
            assert not wal.exists() or wal.stat().st_size == 0, "the template kept a WAL"
        return self.path

    def upgrade(self, engine: Any, config: Any = None) -> str:
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        if config is None and database and _empty(Path(database)):
            shutil.copyfile(self._made(), database)  # into the file made for it (0600)
            self.copies += 1
        return self.real(engine, config)


def _empty(path: Path) -> bool:
    try:
        if path.stat().st_size != 0:
            return False
    except OSError:
        return False
    return not any(os.path.exists(f"{path}{suffix}") for suffix in ("-wal", "-shm"))


@pytest.fixture(scope="session", autouse=True)
def migrate_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    import gputui.scheduler.store.engine as engine_module

    template = Template(tmp_path_factory.mktemp("store-template"), engine_module)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module, "upgrade", template.upgrade)
        yield template
