"""The SQLite `Store` (aiosqlite): the embedded default backend, one instance per file.

`await SQLiteStore.open(path)` opens one connection in WAL mode and upgrades the schema with
the ordered `MIGRATIONS` (`PRAGMA user_version`). The store's parts live next to it:
sessions and history in `store_sqlite_sessions.py`, inbox, pairing and cron in
`store_sqlite_queues.py`, schema and the shared connection in `store_sqlite_base.py`.
"""

from __future__ import annotations

import fcntl
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import aiosqlite

from bot.store.rows import BOOL_COLUMNS, COPY_COLUMNS, INBOX_LEASE, AlreadyRunning, CopyRow
from bot.store.sqlite.base import MIGRATIONS, statements
from bot.store.sqlite.claims import SQLiteClaims
from bot.store.sqlite.queues import SQLiteQueues
from bot.store.sqlite.sessions import SQLiteSessions


def _check_openable(path: Path) -> None:
    """Raise sqlite3's own error if `path` cannot be opened as a database."""
    sqlite3.connect(path).close()


class SQLiteStore(SQLiteSessions, SQLiteQueues, SQLiteClaims):
    """The daemon's database in one SQLite file (or `:memory:`)."""

    latest_schema = len(MIGRATIONS)
    _instance_lock: IO[bytes] | None = None

    @classmethod
    async def open(cls, path: Path | str, *, lease: float = INBOX_LEASE) -> SQLiteStore:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
            # Fail here, not inside aiosqlite: a failed aiosqlite connect leaves its worker
            # thread to report to an event loop that may be closed by then.
            _check_openable(path)
        db = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            store = cls(db, path, lease)
            await store._migrate()
        except BaseException:
            await db.close()
            raise
        return store

    @property
    def location(self) -> str:
        return str(self.path)

    async def close(self) -> None:
        async with self._lock:
            await self._db.close()
        if self._instance_lock is not None:
            self._instance_lock.close()  # releases the instance lock
            self._instance_lock = None

    async def hold_instance(self) -> str:
        """An exclusive lock on `<db>.lock`, held until close or until the process dies."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        handle = open(lock_path, "a+b")  # noqa: ASYNC230, SIM115 (held while the daemon runs)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise AlreadyRunning(
                f"another Perch is already running with {self.path}; stop it first "
                "(perch status shows it)"
            ) from None
        self._instance_lock = handle
        self.holder = uuid.uuid4().hex[:12]
        async with self._transaction() as db:  # whoever held the store before is gone
            await db.execute("UPDATE inbox SET lease_until = 0 WHERE status = 'pending'")
            await db.execute("DELETE FROM claims WHERE NOT done")
        return self.holder

    async def schema_version(self) -> int:
        rows = await self._db.execute_fetchall("PRAGMA user_version")
        return next((int(row[0]) for row in rows), 0)

    async def check_writable(self) -> None:
        async with self._transaction() as db:
            await db.execute("UPDATE sessions SET updated_at = updated_at WHERE 0")

    async def _migrate(self) -> None:
        current = await self.schema_version()
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"{self.path}: database schema {current} is newer than this Perch "
                f"({len(MIGRATIONS)}); upgrade Perch or restore a backup"
            )
        for version in range(current, len(MIGRATIONS)):
            async with self._transaction() as db:
                for statement in statements(MIGRATIONS[version]):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version + 1}")

    # -- copying --------------------------------------------------------------------------

    async def is_empty(self) -> bool:
        for table in COPY_COLUMNS:
            rows = await self._db.execute_fetchall(f"SELECT 1 FROM {table} LIMIT 1")
            if list(rows):
                return False
        return True

    async def dump(self, table: str, batch: int = 500) -> AsyncIterator[list[CopyRow]]:
        columns = COPY_COLUMNS[table]
        flags = [(table, c) in BOOL_COLUMNS for c in columns]
        async with self._db.execute(
            f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid"
        ) as cur:
            while rows := await cur.fetchmany(batch):
                yield [
                    tuple(bool(v) if flag else v for v, flag in zip(r, flags, strict=True))
                    for r in rows
                ]

    async def load(self, table: str, rows: list[CopyRow]) -> None:
        columns = COPY_COLUMNS[table]
        marks = ", ".join("?" for _ in columns)
        async with self._transaction() as db:
            await db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
            )

    async def finish_load(self) -> None:
        """Nothing to do: AUTOINCREMENT continues after the largest id."""
