"""PostgreSQL: sessions, their message history and the usage ledger (part of `PostgresStore`).

A run's write locks its session row first (the totals UPDATE), so concurrent runs of one
session, on this instance or another, commit one after the other and their messages never
interleave; everything of a run lands in one transaction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from agents.model import Message, Usage
from bot.store.postgres.base import PostgresBase, affected
from bot.store.rows import SessionRow, UsageDay, decode_message, encode_message

_SESSION_COLUMNS = (
    "id, key, summary, compactions, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd, context_tokens, origin, created_at, updated_at"
)
_TOTALS = (
    "input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, "
    "cache_read_tokens = cache_read_tokens + $4, cache_write_tokens = cache_write_tokens + $5, "
    "cost_usd = cost_usd + $6"
)


def _usage_params(usage: Usage) -> tuple[Any, ...]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.cost_usd,
    )


_RECENT = (  # a session's last N messages, oldest first, each with the session's total
    "SELECT role, content, (SELECT count(*) FROM messages WHERE session_id = $1 "
    "AND rejected = '') FROM (SELECT id, role, content FROM messages WHERE session_id = $1 "
    "AND rejected = '' ORDER BY id DESC LIMIT $2) AS tail ORDER BY id"
)


class PostgresSessions(PostgresBase):
    async def session(self, key: str) -> SessionRow:
        row = await self._fetch_session(key)
        if row is not None:
            return row
        now = time.time()
        await self._pool.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES ($1, $2, $3, $3) "
            "ON CONFLICT DO NOTHING",
            uuid.uuid4().hex,
            key,
            now,
        )
        row = await self._fetch_session(key)
        assert row is not None
        return row

    async def find_session(self, key: str) -> SessionRow | None:
        return await self._fetch_session(key)

    async def _fetch_session(self, key: str) -> SessionRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = $1 AND NOT archived", key
        )
        return SessionRow(*row) if row is not None else None

    async def list_sessions(self, limit: int = 100, *, archived: bool = False) -> list[SessionRow]:
        where = "" if archived else "WHERE NOT archived "
        rows = await self._pool.fetch(
            f"SELECT {_SESSION_COLUMNS} FROM sessions {where}ORDER BY updated_at DESC LIMIT $1",
            limit,
        )
        return [SessionRow(*r) for r in rows]

    async def recent_origins(self, limit: int = 50) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT origin FROM sessions WHERE NOT archived AND origin != '' "
            "ORDER BY updated_at DESC LIMIT $1",
            limit,
        )
        return [str(r[0]) for r in rows]

    async def messages(self, session_id: str) -> list[Message]:
        rows = await self._pool.fetch(
            "SELECT role, content FROM messages WHERE session_id = $1 AND rejected = '' "
            "ORDER BY id",
            session_id,
        )
        return [decode_message(r[0], r[1]) for r in rows]

    async def recent_messages(self, session_id: str, limit: int) -> tuple[list[Message], int]:
        rows = await self._pool.fetch(_RECENT, session_id, max(limit, 0))
        return await self._recent(session_id, limit, rows)

    async def _recent(
        self, session_id: str, limit: int, rows: list[Any]
    ) -> tuple[list[Message], int]:
        if not rows:
            return [], await self.count_messages(session_id) if limit <= 0 else 0
        return [decode_message(r[0], r[1]) for r in rows], int(rows[0][2])

    async def session_with_recent(
        self, key: str, limit: int
    ) -> tuple[SessionRow, list[Message], int]:
        select = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = $1 AND NOT archived"
        async with self._pool.acquire() as conn:  # one connection for all of it
            row = await conn.fetchrow(select, key)
            if row is None:  # first use: create it (or find another instance's)
                await conn.execute(
                    "INSERT INTO sessions (id, key, created_at, updated_at) "
                    "VALUES ($1, $2, $3, $3) ON CONFLICT DO NOTHING",
                    uuid.uuid4().hex,
                    key,
                    time.time(),
                )
                row = await conn.fetchrow(select, key)
                assert row is not None
            rows = await conn.fetch(_RECENT, row[0], max(limit, 0))
        session = SessionRow(*row)
        return (session, *await self._recent(session.id, limit, rows))

    async def messages_with_ids(self, session_id: str) -> list[tuple[int, Message]]:
        rows = await self._pool.fetch(
            "SELECT id, role, content FROM messages WHERE session_id = $1 AND rejected = '' "
            "ORDER BY id",
            session_id,
        )
        return [(int(r[0]), decode_message(r[1], r[2])) for r in rows]

    async def count_messages(self, session_id: str) -> int:
        count = await self._pool.fetchval(
            "SELECT count(*) FROM messages WHERE session_id = $1 AND rejected = ''", session_id
        )
        return int(count)

    async def save_run(
        self,
        session_id: str,
        session_key: str,
        messages: Iterable[Message],
        *,
        usage: Usage,
        run_id: str = "",
        model: str = "",
        context_tokens: int | None = None,
        origin: str | None = None,
        rejected: str = "",
    ) -> None:
        now = time.time()
        rows = [(session_id, *encode_message(m), run_id, now, rejected) for m in messages]
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                f"UPDATE sessions SET {_TOTALS}, updated_at = $7, "
                "model = CASE WHEN $8 = '' THEN model ELSE $8 END, "
                "context_tokens = COALESCE($9, context_tokens), origin = COALESCE($10, origin) "
                "WHERE id = $1",
                session_id,
                *_usage_params(usage),
                now,
                model,
                context_tokens,
                origin,
            )
            if rows:
                await conn.executemany(
                    "INSERT INTO messages (session_id, role, content, run_id, created_at, "
                    "rejected) VALUES ($1, $2, $3, $4, $5, $6)",
                    rows,
                )
            if usage.input_tokens or usage.output_tokens or usage.cost_usd:
                await conn.execute(
                    "INSERT INTO usage (session_key, input_tokens, output_tokens, "
                    "cache_read_tokens, cache_write_tokens, cost_usd, run_id, model, created_at)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    session_key,
                    *_usage_params(usage),
                    run_id,
                    model,
                    now,
                )

    async def add_session_totals(self, keys: Iterable[str], usage: Usage) -> None:
        keys = list(keys)
        if not keys:
            return
        await self._pool.execute(
            f"UPDATE sessions SET {_TOTALS}, updated_at = $7 "
            "WHERE NOT archived AND key = ANY($1::text[])",
            keys,
            *_usage_params(usage),
            time.time(),
        )

    async def add_usage(self, session_key: str, usage: Usage, *, model: str = "") -> None:
        session = await self.session(session_key)
        await self.save_run(session.id, session_key, (), usage=usage, model=model)

    async def compact(self, session_id: str, summary: str, upto_id: int) -> int:
        """Messages saved after the summarised ones (a concurrent run's) are kept."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE sessions SET summary = $2, compactions = compactions + 1, "
                "context_tokens = 0, updated_at = $3 WHERE id = $1",
                session_id,
                summary,
                time.time(),
            )
            status = await conn.execute(
                "DELETE FROM messages WHERE session_id = $1 AND id <= $2", session_id, upto_id
            )
        return affected(status)

    async def trim_runs(self, session_id: str, keep_runs: int) -> int:
        status = await self._pool.execute(
            "DELETE FROM messages WHERE session_id = $1 AND run_id NOT IN (SELECT run_id "
            "FROM messages WHERE session_id = $1 GROUP BY run_id ORDER BY max(id) DESC "
            "LIMIT $2)",
            session_id,
            keep_runs,
        )
        return affected(status)

    async def archive_session(self, key: str) -> bool:
        status = await self._pool.execute(
            "UPDATE sessions SET archived = true, updated_at = $2 WHERE key = $1 AND NOT archived",
            key,
            time.time(),
        )
        return affected(status) > 0

    async def reset_session(self, key: str) -> bool:
        session = await self._fetch_session(key)
        if session is None:
            return False
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE sessions SET summary = '', context_tokens = 0, updated_at = $2 "
                "WHERE id = $1",
                session.id,
                time.time(),
            )
            await conn.execute("DELETE FROM messages WHERE session_id = $1", session.id)
        return True

    async def session_model(self, session_key: str) -> str:
        async with self._pool.acquire() as conn:
            value = await conn.fetchval(
                "SELECT model FROM session_models WHERE session_key = $1", session_key
            )
        return str(value) if value is not None else ""

    async def set_session_model(self, session_key: str, model: str) -> None:
        async with self._pool.acquire() as conn:
            if model:
                await conn.execute(
                    "INSERT INTO session_models (session_key, model, updated_at) "
                    "VALUES ($1, $2, $3) ON CONFLICT (session_key) DO UPDATE "
                    "SET model = excluded.model, updated_at = excluded.updated_at",
                    session_key,
                    model,
                    time.time(),
                )
            else:
                await conn.execute("DELETE FROM session_models WHERE session_key = $1", session_key)

    async def usage_since(self, since: float) -> Usage:
        row = await self._pool.fetchrow(
            "SELECT COALESCE(sum(input_tokens),0), COALESCE(sum(output_tokens),0), "
            "COALESCE(sum(cache_read_tokens),0), COALESCE(sum(cache_write_tokens),0), "
            "COALESCE(sum(cost_usd),0) FROM usage WHERE created_at >= $1",
            since,
        )
        assert row is not None
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]))

    async def usage_by_day(self, since: float, *, session_prefix: str = "") -> list[UsageDay]:
        rows = await self._pool.fetch(
            "SELECT to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, "
            "model, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            "sum(cache_write_tokens), sum(cost_usd) FROM usage WHERE created_at >= $1 "
            "AND left(session_key, length($2)) = $2 "
            "GROUP BY day, model ORDER BY day, model",
            since,
            session_prefix,
        )
        return [
            UsageDay(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]))
            for r in rows
        ]
