"""SQLite: what channels keep across restarts (part of `SQLiteStore`), by channel and name."""

from __future__ import annotations

import time

from bot.store.sqlite.base import SQLiteBase


class SQLiteChannelState(SQLiteBase):
    async def channel_state(self, channel: str, name: str) -> str | None:
        row = await self._db.fetchone(
            "SELECT value FROM channel_state WHERE channel = ? AND name = ?", (channel, name)
        )
        return None if row is None else str(row[0])

    async def set_channel_state(self, channel: str, name: str, value: str) -> None:
        await self._db.execute(
            "INSERT INTO channel_state (channel, name, value, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (channel, name) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at",
            (channel, name, value, time.time()),
        )
