"""SQLite: sessions, their message history and the usage ledger (part of `SQLiteStore`).

Message content is stored as the JSON list of content blocks, in order. A run's messages,
the session's totals and its ledger row are written in one transaction.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterable
from typing import Any

from agents.model import Message, Usage
from bot.store.rows import SessionRow, decode_message, encode_message
from bot.store.sqlite.base import SQLiteBase

_SESSION_COLUMNS = (
    "id, key, summary, compactions, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd, context_tokens, origin, created_at, updated_at"
)
_SELECT_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ? AND archived = 0"
_RECENT = (  # a session's last N messages, oldest first, each with the session's total
    "SELECT role, content, (SELECT count(*) FROM messages WHERE session_id = ?) "
    "FROM (SELECT id, role, content FROM messages WHERE session_id = ? "
    "ORDER BY id DESC LIMIT ?) ORDER BY id"
)


class SQLiteSessions(SQLiteBase):
    async def session(self, key: str) -> SessionRow:
        row = await self._fetch_session(key)
        if row is not None:
            return row
        now = time.time()

        def create(db: sqlite3.Connection) -> SessionRow:
            db.execute(
                "INSERT OR IGNORE INTO sessions (id, key, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (uuid.uuid4().hex, key, now, now),
            )
            return SessionRow(*db.execute(_SELECT_SESSION, (key,)).fetchone())

        return await self._in_transaction(create)  # one hand-off, not two

    async def find_session(self, key: str) -> SessionRow | None:
        return await self._fetch_session(key)

    async def _fetch_session(self, key: str) -> SessionRow | None:
        # Per-turn reads use execute_fetchall: one hop to the database thread instead of
        # three (execute, fetch, close).
        rows = await self._db.execute_fetchall(_SELECT_SESSION, (key,))
        return next((SessionRow(*row) for row in rows), None)

    async def list_sessions(self, limit: int = 100, *, archived: bool = False) -> list[SessionRow]:
        where = "" if archived else "WHERE archived = 0 "
        rows = await self._db.execute_fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions {where}ORDER BY updated_at DESC LIMIT ?",
            (limit,),
        )
        return [SessionRow(*r) for r in rows]

    async def recent_origins(self, limit: int = 50) -> list[str]:
        rows = await self._db.execute_fetchall(
            "SELECT origin FROM sessions WHERE archived = 0 AND origin != '' "
            "ORDER BY updated_at DESC LIMIT ?",
            (limit,),
        )
        return [str(r[0]) for r in rows]

    async def messages(self, session_id: str) -> list[Message]:
        rows = await self._db.execute_fetchall(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [decode_message(role, content) for role, content in rows]

    async def messages_with_ids(self, session_id: str) -> list[tuple[int, Message]]:
        rows = await self._db.execute_fetchall(
            "SELECT id, role, content FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return [(i, decode_message(role, c)) for i, role, c in rows]

    async def recent_messages(self, session_id: str, limit: int) -> tuple[list[Message], int]:
        rows = await self._db.execute_fetchall(_RECENT, (session_id, session_id, max(limit, 0)))
        return await self._recent(session_id, limit, list(rows))

    async def _recent(
        self, session_id: str, limit: int, rows: list[Any]
    ) -> tuple[list[Message], int]:
        if not rows:
            return [], await self.count_messages(session_id) if limit <= 0 else 0
        return [decode_message(role, content) for role, content, _ in rows], int(rows[0][2])

    async def session_with_recent(
        self, key: str, limit: int
    ) -> tuple[SessionRow, list[Message], int]:
        conn = self._db._conn  # one hand-off for both reads (see `_in_transaction`)

        def read(db: sqlite3.Connection) -> tuple[SessionRow, list[Any]] | None:
            row = db.execute(_SELECT_SESSION, (key,)).fetchone()
            if row is None:
                return None
            session = SessionRow(*row)
            return session, db.execute(_RECENT, (session.id, session.id, max(limit, 0))).fetchall()

        def create_and_read(db: sqlite3.Connection) -> tuple[SessionRow, list[Any]] | None:
            now = time.time()
            db.execute(
                "INSERT OR IGNORE INTO sessions (id, key, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (uuid.uuid4().hex, key, now, now),
            )
            return read(db)

        found: tuple[SessionRow, list[Any]] | None = await self._db._execute(lambda: read(conn))
        if found is None:  # first use: created and read in one transaction
            found = await self._in_transaction(create_and_read)
            assert found is not None
        session, rows = found
        return (session, *await self._recent(session.id, limit, rows))

    async def count_messages(self, session_id: str) -> int:
        rows = await self._db.execute_fetchall(
            "SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)
        )
        return next((int(row[0]) for row in rows), 0)

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
    ) -> None:
        now = time.time()
        rows = [(session_id, *encode_message(m), run_id, now) for m in messages]
        totals = (
            now,
            model,
            model,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.cost_usd,
            context_tokens,
            origin,
            session_id,
        )
        ledger = (
            session_key,
            run_id,
            model,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.cost_usd,
            now,
        )
        charged = bool(usage.input_tokens or usage.output_tokens or usage.cost_usd)

        def save(db: sqlite3.Connection) -> None:
            if rows:
                db.executemany(
                    "INSERT INTO messages (session_id, role, content, run_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
            db.execute(
                "UPDATE sessions SET updated_at = ?, model = CASE WHEN ? = '' THEN model ELSE ? "
                "END, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                "cache_read_tokens = cache_read_tokens + ?, "
                "cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?, "
                "context_tokens = COALESCE(?, context_tokens), origin = COALESCE(?, origin) "
                "WHERE id = ?",
                totals,
            )
            if charged:
                db.execute(
                    "INSERT INTO usage (session_key, run_id, model, input_tokens, output_tokens,"
                    " cache_read_tokens, cache_write_tokens, cost_usd, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    ledger,
                )

        await self._in_transaction(save)  # one hand-off to the database thread, not five

    async def add_session_totals(self, keys: Iterable[str], usage: Usage) -> None:
        keys = list(keys)
        if not keys:
            return
        marks = ", ".join("?" for _ in keys)
        async with self._lock:
            await self._db.execute(
                "UPDATE sessions SET updated_at = ?, input_tokens = input_tokens + ?, "
                "output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?, "
                "cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ? "
                f"WHERE archived = 0 AND key IN ({marks})",
                (
                    time.time(),
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    usage.cost_usd,
                    *keys,
                ),
            )

    async def add_usage(self, session_key: str, usage: Usage, *, model: str = "") -> None:
        session = await self.session(session_key)
        await self.save_run(session.id, session_key, (), usage=usage, model=model)

    async def compact(self, session_id: str, summary: str, upto_id: int) -> int:
        """Messages saved after the summarised ones (a concurrent run's) are kept."""
        async with self._transaction() as db:
            cur = await db.execute(
                "DELETE FROM messages WHERE session_id = ? AND id <= ?", (session_id, upto_id)
            )
            removed = cur.rowcount
            await db.execute(
                "UPDATE sessions SET summary = ?, compactions = compactions + 1, "
                "context_tokens = 0, updated_at = ? WHERE id = ?",
                (summary, time.time(), session_id),
            )
        return removed

    async def trim_runs(self, session_id: str, keep_runs: int) -> int:
        async with self._lock:
            cur = await self._db.execute(
                "DELETE FROM messages WHERE session_id = ? AND run_id NOT IN (SELECT run_id "
                "FROM messages WHERE session_id = ? GROUP BY run_id ORDER BY max(id) DESC "
                "LIMIT ?)",
                (session_id, session_id, keep_runs),
            )
        return cur.rowcount

    async def archive_session(self, key: str) -> bool:
        async with self._lock:
            cur = await self._db.execute(
                "UPDATE sessions SET archived = 1, updated_at = ? WHERE key = ? AND archived = 0",
                (time.time(), key),
            )
        return cur.rowcount > 0

    async def reset_session(self, key: str) -> bool:
        session = await self._fetch_session(key)
        if session is None:
            return False
        async with self._transaction() as db:
            await db.execute("DELETE FROM messages WHERE session_id = ?", (session.id,))
            await db.execute(
                "UPDATE sessions SET summary = '', context_tokens = 0, updated_at = ? WHERE id = ?",
                (time.time(), session.id),
            )
        return True

    async def session_model(self, session_key: str) -> str:
        rows = await self._db.execute_fetchall(
            "SELECT model FROM session_models WHERE session_key = ?", (session_key,)
        )
        return next((str(r[0]) for r in rows), "")

    async def set_session_model(self, session_key: str, model: str) -> None:
        async with self._transaction() as db:
            if model:
                await db.execute(
                    "INSERT INTO session_models (session_key, model, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT(session_key) DO UPDATE SET model = excluded.model,"
                    " updated_at = excluded.updated_at",
                    (session_key, model, time.time()),
                )
            else:
                await db.execute("DELETE FROM session_models WHERE session_key = ?", (session_key,))

    async def usage_since(self, since: float) -> Usage:
        rows = await self._db.execute_fetchall(
            "SELECT COALESCE(sum(input_tokens),0), COALESCE(sum(output_tokens),0), "
            "COALESCE(sum(cache_read_tokens),0), COALESCE(sum(cache_write_tokens),0), "
            "COALESCE(sum(cost_usd),0) FROM usage WHERE created_at >= ?",
            (since,),
        )
        row = next(iter(rows))
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]))
