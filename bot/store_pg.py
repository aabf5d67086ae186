"""The PostgreSQL `Store` (asyncpg): a database server that several Perch instances can share.

`await PostgresStore.open("postgresql://user@host/db")` opens a connection pool and upgrades
the schema with its own `MIGRATIONS` (`perch_schema` holds the version). The store's parts
live next to it: sessions and history in `store_pg_sessions.py`, inbox, pairing and cron in
`store_pg_queues.py`, schema and the shared pool in `store_pg_base.py`.
"""

from __future__ import annotations

import asyncpg

from bot.store_pg_base import MIGRATE_LOCK, MIGRATIONS, redact_url
from bot.store_pg_queues import PostgresQueues
from bot.store_pg_sessions import PostgresSessions

POOL_SIZE = 10
CONNECT_TIMEOUT = 10.0


class PostgresStore(PostgresSessions, PostgresQueues):
    """The daemon's database on a PostgreSQL server."""

    latest_schema = len(MIGRATIONS)

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        try:
            pool = await asyncpg.create_pool(
                url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT
            )
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            raise ConnectionError(
                f"{redact_url(url)}: cannot connect to PostgreSQL ({exc}); check store.url "
                "and that the server is running"
            ) from None
        store = cls(pool, url)
        try:
            await store._migrate()
        except BaseException:
            await pool.close()
            raise
        return store

    async def close(self) -> None:
        await self._pool.close()

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
                    raise RuntimeError(
                        f"{self.location}: database schema {current} is newer than this Perch "
                        f"({len(MIGRATIONS)}); upgrade Perch"
                    )
                for version in range(current, len(MIGRATIONS)):
                    async with conn.transaction():
                        await conn.execute(MIGRATIONS[version])
                        await conn.execute("UPDATE perch_schema SET version = $1", version + 1)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATE_LOCK)
