"""SQLite: claims (part of `SQLiteStore`). One daemon holds the file, so leadership is
always its own; claims still work, and keep cron slots from running twice after a restart.
"""

from __future__ import annotations

import time

from bot.store.sqlite.base import SQLiteBase


class SQLiteClaims(SQLiteBase):
    async def claim(self, name: str, slot: float = 0.0, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        rows = await self._db.fetchall(
            "INSERT INTO claims (name, slot, holder, lease_until, done, taken_at) "
            "VALUES (?, ?, ?, ?, 0, ?) ON CONFLICT (name, slot) DO UPDATE SET "
            "holder = excluded.holder, lease_until = excluded.lease_until, "
            "taken_at = excluded.taken_at WHERE NOT claims.done AND "
            "(claims.lease_until < ? OR claims.holder = excluded.holder) RETURNING 1",
            (name, slot, self.holder, now + self.lease, now, now),
        )
        return bool(rows)

    async def release(self, name: str, slot: float = 0.0, *, done: bool) -> None:
        if done:
            await self._db.execute(
                "UPDATE claims SET done = 1, lease_until = 0 "
                "WHERE name = ? AND slot = ? AND holder = ?",
                (name, slot, self.holder),
            )
        else:
            await self._db.execute(
                "DELETE FROM claims WHERE name = ? AND slot = ? AND holder = ? AND NOT done",
                (name, slot, self.holder),
            )

    async def claims_prune(self, older_than: float) -> None:
        await self._db.execute("DELETE FROM claims WHERE done AND taken_at < ?", (older_than,))

    async def claim_done(self, name: str, slot: float = 0.0) -> bool:
        row = await self._db.fetchone(
            "SELECT 1 FROM claims WHERE name = ? AND slot = ? AND done", (name, slot)
        )
        return row is not None

    async def claim_holders(self, name: str) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT DISTINCT holder FROM claims WHERE name = ? AND NOT done "
            "AND lease_until >= ? AND holder <> ? ORDER BY holder",
            (name, time.time(), self.holder),
        )
        return [r[0] for r in rows]

    async def stop_publish(self, session_key: str, everything: bool) -> int:
        done = await self._db.execute(
            "INSERT INTO stops (session_key, everything, origin, at) VALUES (?, ?, ?, ?)",
            (session_key, int(everything), self.holder, time.time()),
        )
        return int(done.lastrowid or 0)

    async def stops_after(self, after: int | None) -> tuple[int, list[tuple[str, bool]]]:
        if after is None:
            newest = await self._db.fetchone("SELECT COALESCE(max(id), 0) FROM stops")
            return int(newest[0]) if newest else 0, []
        rows = await self._db.fetchall(
            "SELECT id, session_key, everything, origin FROM stops WHERE id > ? ORDER BY id",
            (after,),
        )
        last = max((int(r[0]) for r in rows), default=after)
        return last, [(r[1], bool(r[2])) for r in rows if r[3] != self.holder]

    async def leadership(self, name: str) -> bool:
        return True
