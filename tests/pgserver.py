"""A real PostgreSQL server for the tests, started once per test process.

Debian's ``postgresql`` package puts its server under ``/usr/lib/postgresql/N/bin``.
``initdb`` and ``pg_ctl`` refuse to run as root, so under root the server runs as an
unprivileged user of its own (``gputui-pg``, made with ``useradd`` when missing), in
a directory that user owns, listening on a Unix socket there only (no TCP port), with
``fsync`` and ``synchronous_commit`` on: the durability tests rely on a commit being
on disk. Each test gets the one migrated database emptied (every table but Alembic's
truncated, ids restarted: as new, in a few milliseconds, where copying a template
database takes 0.4 s with fsync on), or a new empty one (``PgServer.database``).
Where no server binaries are installed, the tests that need one skip, saying so.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from privileged import accounts_lock

PG_USER = "gputui-pg"
NO_SERVER = "PostgreSQL server not installed (Debian package postgresql)"


def server_bin() -> Path | None:
    """The newest installed server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def _run_as() -> dict[str, Any]:
    """``subprocess`` arguments that run the server's tools as a user other than root."""
    if os.geteuid() != 0:
        return {}
    # Test processes start at once: one makes the user, under the lock every test that
    # makes users takes (useradd may still find /etc/passwd locked by another program:
    # it is tried again).
    with accounts_lock():
        for attempt in range(10):
            try:
                entry = pwd.getpwnam(PG_USER)
                break
            except KeyError:
                made = subprocess.run(
                    ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                     PG_USER],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if made.returncode not in (0, 9) and attempt == 9:
                    raise RuntimeError(f"useradd {PG_USER}: {made.stderr.strip()}") from None
                if made.returncode not in (0, 9):
                    time.sleep(0.5)  # /etc/passwd held by another useradd: a bounded retry
        else:
            raise RuntimeError(f"useradd {PG_USER} made no user")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


class PgServer:
    """One PostgreSQL server in a directory of its own; ``url()`` names a database."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.as_user = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="gputui-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if self.as_user:
            os.chown(self.root, self.as_user["user"], self.as_user["group"])
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        self._count = 0
        self._template = False

    def _tool(self, *argv: str) -> None:
        done = subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.root,
            **self.as_user,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip()[-1000:]}")

    def start(self) -> None:
        self._tool("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        self._tool(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o",
            f"-k {self.root} -c listen_addresses= -c fsync=on -c synchronous_commit=on"
            " -c max_connections=200",
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._tool("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.root}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host=str(self.root), user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)

    def database(self, *, migrated: bool = True) -> str:
        """The URL of a database with nothing in it: ``migrated``, the one at the
        newest schema (migrated once per server, as ``migrate_once`` does for SQLite
        files), emptied; else a new one without even a schema."""
        if not migrated:
            self._count += 1
            self._admin(f"CREATE DATABASE t{self._count}")
            return self.url(f"t{self._count}")
        if not self._template:
            self._admin("CREATE DATABASE gputui")
            engine = self._engine_module().make_engine(self.url("gputui"))
            try:
                self._engine_module().upgrade(engine)
            finally:
                engine.dispose()
            self._template = True
        import psycopg

        with psycopg.connect(host=str(self.root), user="postgres", dbname="gputui") as conn:
            conn.execute("SET lock_timeout = '20s'")  # a test that left a connection open
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT quote_ident(tablename) FROM pg_tables"
                    " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
                )
            ]
            conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
        return self.url("gputui")

    @staticmethod
    def _engine_module() -> Any:
        from gputui.scheduler.store import engine

        return engine


def connect(url: str) -> Any:
    """A psycopg connection (autocommit) to the database a test's ``url`` names."""
    import psycopg
    from sqlalchemy.engine import make_url

    parts = make_url(url)
    return psycopg.connect(
        host=str(parts.query["host"]), user=parts.username, dbname=parts.database, autocommit=True
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = server_bin()
    if bindir is None:
        pytest.skip(NO_SERVER)
    server = PgServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
