"""The SQLite `Store` (aiosqlite): the embedded default backend, one instance per file.

`await SQLiteStore.open(path)` opens one connection in WAL mode and upgrades the schema with
the ordered `MIGRATIONS` (`PRAGMA user_version`). The store's parts live next to it:
sessions and history in `store_sqlite_sessions.py`, inbox, pairing and cron in
`store_sqlite_queues.py`, schema and the shared connection in `store_sqlite_base.py`.
"""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from bot.store_sqlite_base import MIGRATIONS, statements
from bot.store_sqlite_queues import SQLiteQueues
from bot.store_sqlite_sessions import SQLiteSessions


class SQLiteStore(SQLiteSessions, SQLiteQueues):
    """The daemon's database in one SQLite file (or `:memory:`)."""

    latest_schema = len(MIGRATIONS)

    @classmethod
    async def open(cls, path: Path | str) -> SQLiteStore:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            store = cls(db, path)
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
