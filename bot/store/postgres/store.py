"""The PostgreSQL `Store` (asyncpg): a database server that several Perch instances can share.

`await PostgresStore.open("postgresql://user@host/db")` opens a connection pool and upgrades
the schema with its own `MIGRATIONS` (`perch_schema` holds the version). The store's parts
live next to it: sessions and history in `sessions.py`, inbox, pairing and cron in
`queues.py`, claims and stops in `claims.py`, the search index in `search.py` and its
embeddings' vectors in `vectors.py`, approvals in `approvals.py`, schema and the shared pool in `base.py`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg

from bot.store.postgres.approvals import PostgresApprovals
from bot.store.postgres.base import MIGRATE_LOCK, MIGRATIONS
from bot.store.postgres.channel_state import PostgresChannelState
from bot.store.postgres.claims import PostgresClaims
from bot.store.postgres.queues import PostgresQueues
from bot.store.postgres.search import PostgresSearch
from bot.store.postgres.sessions import PostgresSessions
from bot.store.postgres.vectors import PostgresVectors
from bot.store.rows import (
    COPY_COLUMNS,
    INBOX_LEASE,
    CopyRow,
    SchemaTooNew,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

POOL_SIZE = 10
# the key each table is dumped in (the order rows were written, where there is an id)
_ORDER = {
    "pairing": "channel, code",
    "approved_senders": "channel, sender_id",
    "session_models": "session_key",
    "channel_state": "channel, name",
}
_IDENTITY = ("messages", "inbox", "usage", "cron_runs")
CONNECT_TIMEOUT = 10.0


class PostgresStore(
    PostgresSessions,
    PostgresQueues,
    PostgresClaims,
    PostgresSearch,
    PostgresVectors,
    PostgresApprovals,
    PostgresChannelState,
):
    """The daemon's database on a PostgreSQL server."""

    latest_schema = len(MIGRATIONS)

    @classmethod
    async def open(cls, url: str, *, lease: float = INBOX_LEASE) -> PostgresStore:
        try:
            pool = await asyncpg.create_pool(
                url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError, ValueError, asyncpg.PostgresError,
                asyncpg.InterfaceError) as exc:  # fmt: skip
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL ({exc}); check store.url and that the server "
                "is running"
            ) from None
        store = cls(pool, url, lease)
        try:
            await store._migrate()
        except BaseException:
            await pool.close()
            raise
        return store

    async def close(self) -> None:
        await self._pool.close()
        await self.resign_all()

    async def hold_instance(self) -> str:
        """Any number of instances share the database: each gets an id its inbox rows and
        claims are leased to; a dead one's leases run out and the others take over."""
        self.holder = uuid.uuid4().hex[:12]
        return self.holder

    async def schema_version(self) -> int:
        exists = await self._pool.fetchval("SELECT to_regclass('perch_schema') IS NOT NULL")
        if not exists:
            return 0
        return int(await self._pool.fetchval("SELECT version FROM perch_schema"))

    async def check_writable(self) -> None:
        async with self._pool.acquire() as conn:
            if await conn.fetchval("SELECT pg_is_in_recovery()"):
                raise PermissionError("the server is a read-only standby")
            async with conn.transaction():
                await conn.execute("UPDATE sessions SET updated_at = updated_at WHERE false")

    async def _migrate(self) -> None:
        async with self._pool.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", MIGRATE_LOCK)
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS perch_schema (version INTEGER NOT NULL)"
                )
                async with conn.transaction():
                    current = await conn.fetchval("SELECT version FROM perch_schema")
                    if current is None:
                        await conn.execute("INSERT INTO perch_schema (version) VALUES (0)")
                        current = 0
                if current > len(MIGRATIONS):
                    raise SchemaTooNew(self.location, current, len(MIGRATIONS))
                for version in range(current, len(MIGRATIONS)):
                    async with conn.transaction():
                        await conn.execute(MIGRATIONS[version])
                        await conn.execute("UPDATE perch_schema SET version = $1", version + 1)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATE_LOCK)

    # -- copying --------------------------------------------------------------------------

    async def is_empty(self) -> bool:
        for table in COPY_COLUMNS:
            if await self._pool.fetchval(f"SELECT 1 FROM {table} LIMIT 1") is not None:
                return False
        return True

    async def dump(self, table: str, batch: int = 500) -> AsyncIterator[list[CopyRow]]:
        columns = ", ".join(COPY_COLUMNS[table])
        sql = f"SELECT {columns} FROM {table} ORDER BY {_ORDER.get(table, 'id')}"
        async with self._pool.acquire() as conn, conn.transaction():
            cursor = await conn.cursor(sql)
            while rows := await cursor.fetch(batch):
                yield [tuple(r) for r in rows]

    async def load(self, table: str, rows: list[CopyRow]) -> None:
        columns = COPY_COLUMNS[table]
        marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        override = " OVERRIDING SYSTEM VALUE" if table in _IDENTITY else ""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}){override} VALUES ({marks})", rows
            )

    async def finish_load(self) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            for table in _IDENTITY:
                await conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"COALESCE((SELECT max(id) FROM {table}), 0) + 1, false)"
                )
