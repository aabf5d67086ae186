"""PostgreSQL: claims and leadership across instances (part of `PostgresStore`).

A claim is a row of `claims` leased to one instance (renewed by its beat, see
`store_pg_queues.instance_beat`); `INSERT ... ON CONFLICT DO UPDATE ... WHERE` takes it
atomically, so of two instances racing for a free or expired claim exactly one wins.
Leadership is a session advisory lock (class `INSTANCE_LOCK`, key `hashtext(name)`) on a
connection of its own: the server releases it the moment the leader's process dies.
"""

from __future__ import annotations

import logging
import time

import asyncpg

from bot.store.postgres.base import INSTANCE_LOCK, PostgresBase

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0


class PostgresClaims(PostgresBase):
    async def claim(self, name: str, slot: float = 0.0, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        row = await self._pool.fetchval(
            "INSERT INTO claims (name, slot, holder, lease_until, done, taken_at) "
            "VALUES ($1, $2, $3, $4, false, $5) ON CONFLICT (name, slot) DO UPDATE SET "
            "holder = excluded.holder, lease_until = excluded.lease_until, "
            "taken_at = excluded.taken_at WHERE NOT claims.done AND "
            "(claims.lease_until < $5 OR claims.holder = excluded.holder) RETURNING 1",
            name,
            slot,
            self.holder,
            now + self.lease,
            now,
        )
        return row is not None

    async def release(self, name: str, slot: float = 0.0, *, done: bool) -> None:
        if done:
            await self._pool.execute(
                "UPDATE claims SET done = true, lease_until = 0 "
                "WHERE name = $1 AND slot = $2 AND holder = $3",
                name,
                slot,
                self.holder,
            )
        else:
            await self._pool.execute(
                "DELETE FROM claims WHERE name = $1 AND slot = $2 AND holder = $3 AND NOT done",
                name,
                slot,
                self.holder,
            )

    async def claims_prune(self, older_than: float) -> None:
        await self._pool.execute("DELETE FROM claims WHERE done AND taken_at < $1", older_than)
        await self._pool.execute("DELETE FROM stops WHERE at < $1", older_than)

    async def claim_done(self, name: str, slot: float = 0.0) -> bool:
        row = await self._pool.fetchval(
            "SELECT 1 FROM claims WHERE name = $1 AND slot = $2 AND done", name, slot
        )
        return row is not None

    async def claim_holders(self, name: str) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT DISTINCT holder FROM claims WHERE name = $1 AND NOT done "
            "AND lease_until >= $2 AND holder <> $3 ORDER BY holder",
            name,
            time.time(),
            self.holder,
        )
        return [r[0] for r in rows]

    async def stop_publish(self, session_key: str, everything: bool) -> int:
        return int(
            await self._pool.fetchval(
                "INSERT INTO stops (session_key, everything, origin, at) "
                "VALUES ($1, $2, $3, $4) RETURNING id",
                session_key,
                everything,
                self.holder,
                time.time(),
            )
        )

    async def stops_after(self, after: int | None) -> tuple[int, list[tuple[str, bool]]]:
        if after is None:
            last = await self._pool.fetchval("SELECT COALESCE(max(id), 0) FROM stops")
            return int(last), []
        rows = await self._pool.fetch(
            "SELECT id, session_key, everything, origin FROM stops WHERE id > $1 ORDER BY id",
            after,
        )
        last = max((int(r[0]) for r in rows), default=after)
        return last, [(r[1], bool(r[2])) for r in rows if r[3] != self.holder]

    async def leadership(self, name: str) -> bool:
        leaders = self.__dict__.setdefault("_leaders", {})
        conn = leaders.get(name)
        if conn is not None:
            try:
                await conn.fetchval("SELECT 1", timeout=CONNECT_TIMEOUT)
                return True
            except Exception:  # the lock went with the connection
                conn.terminate()
                del leaders[name]
                log.warning(
                    "%s: lost the leadership of %s (connection dropped)", self.location, name
                )
        conn = await asyncpg.connect(self.url, timeout=CONNECT_TIMEOUT)
        try:
            got = await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, hashtext($2))", INSTANCE_LOCK, name
            )
        except BaseException:
            conn.terminate()
            raise
        if not got:
            await conn.close()
            return False
        leaders[name] = conn
        return True

    async def resign_all(self) -> None:
        """Close the leadership connections (their locks go with them)."""
        leaders = self.__dict__.get("_leaders", {})
        for conn in leaders.values():
            try:
                await conn.close(timeout=5)
            except Exception:
                conn.terminate()
        leaders.clear()
