"""The SQLite `Store`: the embedded default backend, one instance per file.

`await SQLiteStore.open(path)` opens one connection on a thread of its own (`SQLiteThread`),
in WAL mode, and upgrades the schema with the ordered `MIGRATIONS` (`PRAGMA user_version`).
The store's parts live next to it: sessions and history in `sessions.py`, inbox, pairing, cron
and instances in `queues.py`, claims and stops in `claims.py`, the search index in
`search.py` and its embeddings' vectors in `vectors.py`, approvals in `approvals.py`, schema and the shared connection in
`base.py`.
"""

from __future__ import annotations

import fcntl
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from bot.store.rows import BOOL_COLUMNS, COPY_COLUMNS, INBOX_LEASE, AlreadyRunning, CopyRow
from bot.store.sqlite.approvals import SQLiteApprovals
from bot.store.sqlite.base import MIGRATIONS, prepare
from bot.store.sqlite.channel_state import SQLiteChannelState
from bot.store.sqlite.claims import SQLiteClaims
from bot.store.sqlite.queues import SQLiteQueues
from bot.store.sqlite.search import SQLiteSearch
from bot.store.sqlite.sessions import SQLiteSessions
from bot.store.sqlite.thread import SQLiteThread
from bot.store.sqlite.vectors import SQLiteVectors


class SQLiteStore(
    SQLiteSessions,
    SQLiteQueues,
    SQLiteClaims,
    SQLiteSearch,
    SQLiteVectors,
    SQLiteApprovals,
    SQLiteChannelState,
):
    """The daemon's database in one SQLite file (or `:memory:`)."""

    latest_schema = len(MIGRATIONS)
    _instance_lock: IO[bytes] | None = None

    @classmethod
    async def open(cls, path: Path | str, *, lease: float = INBOX_LEASE) -> SQLiteStore:
        """Open and migrate; sqlite3's own error if the file cannot be opened or is not a
        database (no thread is left running then)."""
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        db = await SQLiteThread.open(str(path))
        try:
            await db.run(lambda conn: prepare(conn, path))
        except BaseException:
            await db.close()
            raise
        return cls(db, path, lease)

    @property
    def location(self) -> str:
        return str(self.path)

    async def close(self) -> None:
        try:
            await self._db.close()
        finally:
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

        def forget_the_last_holder(db: sqlite3.Connection) -> None:  # gone, since we hold it
            db.execute("UPDATE inbox SET lease_until = 0 WHERE status = 'pending'")
            db.execute("DELETE FROM claims WHERE NOT done")

        await self._db.transaction(forget_the_last_holder)
        return self.holder

    async def schema_version(self) -> int:
        row = await self._db.fetchone("PRAGMA user_version")
        return 0 if row is None else int(row[0])

    async def check_writable(self) -> None:
        def touch(db: sqlite3.Connection) -> None:
            db.execute("UPDATE sessions SET updated_at = updated_at WHERE 0")

        await self._db.transaction(touch)

    # -- copying --------------------------------------------------------------------------

    async def is_empty(self) -> bool:
        def empty(db: sqlite3.Connection) -> bool:
            return not any(
                db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in COPY_COLUMNS
            )

        return await self._db.run(empty)

    async def dump(self, table: str, batch: int = 500) -> AsyncIterator[list[CopyRow]]:
        """Batches by rowid, each a query of its own: no statement stays open between them."""
        columns = ", ".join(COPY_COLUMNS[table])
        flags = [(table, c) in BOOL_COLUMNS for c in COPY_COLUMNS[table]]
        rows = await self._db.fetchall(
            f"SELECT rowid, {columns} FROM {table} ORDER BY rowid LIMIT ?", (batch,)
        )
        while rows:
            yield [
                tuple(bool(v) if flag else v for v, flag in zip(r[1:], flags, strict=True))
                for r in rows
            ]
            if len(rows) < batch:
                return
            rows = await self._db.fetchall(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (rows[-1][0], batch),
            )

    async def load(self, table: str, rows: list[CopyRow]) -> None:
        columns = COPY_COLUMNS[table]
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

        def insert(db: sqlite3.Connection) -> None:
            db.executemany(sql, rows)

        await self._db.transaction(insert)

    async def finish_load(self) -> None:
        """Nothing to do: AUTOINCREMENT continues after the largest id."""
