"""PostgreSQL: what channels keep across restarts (part of `PostgresStore`), by channel and
name."""

from __future__ import annotations

import time

from bot.store.postgres.base import PostgresBase


class PostgresChannelState(PostgresBase):
    async def channel_state(self, channel: str, name: str) -> str | None:
        value = await self._pool.fetchval(
            "SELECT value FROM channel_state WHERE channel = $1 AND name = $2", channel, name
        )
        return None if value is None else str(value)

    async def set_channel_state(self, channel: str, name: str, value: str) -> None:
        await self._pool.execute(
            "INSERT INTO channel_state (channel, name, value, updated_at) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (channel, name) DO UPDATE "
            "SET value = excluded.value, updated_at = excluded.updated_at",
            channel,
            name,
            value,
            time.time(),
        )
