"""SQLite: sessions, their message history and the usage ledger (part of `SQLiteStore`).

Message content is stored as the JSON list of content blocks, in order. A run's messages,
the session's totals and its ledger row are written in one transaction.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from agents.model import Message, Usage
from bot.store.rows import SessionRow, UsageDay, decode_message, encode_message
from bot.store.sqlite.base import SQLiteBase
from bot.store.sqlite.thread import in_transaction

_SESSION_COLUMNS = (
    "id, key, summary, compactions, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd, context_tokens, origin, created_at, updated_at"
)
_SELECT_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ? AND archived = 0"
# A rejected run's messages (`rejected` holds the API's reason) are kept but never read back.
_COUNT = "SELECT count(*) FROM messages WHERE session_id = ? AND rejected = ''"
_RECENT = (  # a session's last N messages, oldest first, each with the session's total
    f"SELECT role, content, ({_COUNT}) "
    "FROM (SELECT id, role, content FROM messages WHERE session_id = ? AND rejected = '' "
    "ORDER BY id DESC LIMIT ?) ORDER BY id"
)


def _session_in(db: sqlite3.Connection, key: str) -> SessionRow:
    """On the database thread: the active session for `key`, created (in a transaction of its
    own) on first use."""
    row = db.execute(_SELECT_SESSION, (key,)).fetchone()
    if row is None:
        now = time.time()

        def create(db: sqlite3.Connection) -> Any:
            db.execute(
                "INSERT OR IGNORE INTO sessions (id, key, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (uuid.uuid4().hex, key, now, now),
            )
            return db.execute(_SELECT_SESSION, (key,)).fetchone()

        row = in_transaction(db, create)
    return SessionRow(*row)


def _recent_rows(db: sqlite3.Connection, session_id: str, limit: int) -> tuple[list[Any], int]:
    """On the database thread: the last `limit` messages' rows, oldest first, and the count of
    all the session's messages."""
    rows = db.execute(_RECENT, (session_id, session_id, max(limit, 0))).fetchall()
    if rows:
        return rows, int(rows[0][2])
    if limit > 0:
        return [], 0  # none at all
    return [], int(db.execute(_COUNT, (session_id,)).fetchone()[0])


def _decoded(rows: list[Any]) -> list[Message]:
    return [decode_message(role, content) for role, content, *_ in rows]


class SQLiteSessions(SQLiteBase):
    async def session(self, key: str) -> SessionRow:
        return await self._db.run(lambda db: _session_in(db, key))

    async def find_session(self, key: str) -> SessionRow | None:
        row = await self._db.fetchone(_SELECT_SESSION, (key,))
        return None if row is None else SessionRow(*row)

    async def list_sessions(self, limit: int = 100, *, archived: bool = False) -> list[SessionRow]:
        where = "" if archived else "WHERE archived = 0 "
        rows = await self._db.fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions {where}ORDER BY updated_at DESC LIMIT ?",
            (limit,),
        )
        return [SessionRow(*r) for r in rows]

    async def recent_origins(self, limit: int = 50) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT origin FROM sessions WHERE archived = 0 AND origin != '' "
            "ORDER BY updated_at DESC LIMIT ?",
            (limit,),
        )
        return [str(r[0]) for r in rows]

    async def messages(self, session_id: str) -> list[Message]:
        rows = await self._db.fetchall(
            "SELECT role, content FROM messages WHERE session_id = ? AND rejected = '' ORDER BY id",
            (session_id,),
        )
        return _decoded(rows)

    async def messages_with_ids(self, session_id: str) -> list[tuple[int, Message]]:
        rows = await self._db.fetchall(
            "SELECT id, role, content FROM messages WHERE session_id = ? AND rejected = '' "
            "ORDER BY id",
            (session_id,),
        )
        return [(i, decode_message(role, c)) for i, role, c in rows]

    async def recent_messages(self, session_id: str, limit: int) -> tuple[list[Message], int]:
        rows, total = await self._db.run(lambda db: _recent_rows(db, session_id, limit))
        return _decoded(rows), total

    async def session_with_recent(
        self, key: str, limit: int
    ) -> tuple[SessionRow, list[Message], int]:
        def read(db: sqlite3.Connection) -> tuple[SessionRow, list[Any], int]:
            session = _session_in(db, key)
            return (session, *_recent_rows(db, session.id, limit))

        session, rows, total = await self._db.run(read, quick=True)  # new chat or not
        return session, _decoded(rows), total

    async def count_messages(self, session_id: str) -> int:
        row = await self._db.fetchone(_COUNT, (session_id,))
        return 0 if row is None else int(row[0])

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
        save = _saving(
            session_key, messages, usage, run_id, model, context_tokens, origin, rejected
        )
        await self._db.transaction(lambda db: save(db, session_id), quick=True)  # not five

    async def add_session_totals(self, keys: Iterable[str], usage: Usage) -> None:
        keys = list(keys)
        if not keys:
            return
        marks = ", ".join("?" for _ in keys)
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
        save = _saving(session_key, (), usage, "", model, None, None)

        def charge(db: sqlite3.Connection) -> None:
            session = _session_in(db, session_key)
            in_transaction(db, lambda db: save(db, session.id))

        await self._db.run(charge)  # one hand-off for finding the session and the save

    async def compact(self, session_id: str, summary: str, upto_id: int) -> int:
        """Messages saved after the summarised ones (a concurrent run's) are kept."""

        def compact(db: sqlite3.Connection) -> int:
            removed = db.execute(
                "DELETE FROM messages WHERE session_id = ? AND id <= ?", (session_id, upto_id)
            ).rowcount
            db.execute(
                "UPDATE sessions SET summary = ?, compactions = compactions + 1, "
                "context_tokens = 0, updated_at = ? WHERE id = ?",
                (summary, time.time(), session_id),
            )
            return removed

        return await self._db.transaction(compact)

    async def trim_runs(self, session_id: str, keep_runs: int) -> int:
        done = await self._db.execute(
            "DELETE FROM messages WHERE session_id = ? AND run_id NOT IN (SELECT run_id "
            "FROM messages WHERE session_id = ? GROUP BY run_id ORDER BY max(id) DESC "
            "LIMIT ?)",
            (session_id, session_id, keep_runs),
        )
        return done.rowcount

    async def archive_session(self, key: str) -> bool:
        done = await self._db.execute(
            "UPDATE sessions SET archived = 1, updated_at = ? WHERE key = ? AND archived = 0",
            (time.time(), key),
        )
        return done.rowcount > 0

    async def reset_session(self, key: str) -> bool:
        def reset(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT id FROM sessions WHERE key = ? AND archived = 0", (key,))
            found = row.fetchone()
            if found is None:
                return False
            db.execute("DELETE FROM messages WHERE session_id = ?", (found[0],))
            db.execute(
                "UPDATE sessions SET summary = '', context_tokens = 0, updated_at = ? WHERE id = ?",
                (time.time(), found[0]),
            )
            return True

        return await self._db.transaction(reset)

    async def session_model(self, session_key: str) -> str:
        row = await self._db.fetchone(
            "SELECT model FROM session_models WHERE session_key = ?", (session_key,)
        )
        return "" if row is None else str(row[0])

    async def set_session_model(self, session_key: str, model: str) -> None:
        if model:
            await self._db.execute(
                "INSERT INTO session_models (session_key, model, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(session_key) DO UPDATE SET model = excluded.model,"
                " updated_at = excluded.updated_at",
                (session_key, model, time.time()),
            )
        else:
            await self._db.execute(
                "DELETE FROM session_models WHERE session_key = ?", (session_key,)
            )

    async def usage_since(self, since: float) -> Usage:
        row = await self._db.fetchone(
            "SELECT COALESCE(sum(input_tokens),0), COALESCE(sum(output_tokens),0), "
            "COALESCE(sum(cache_read_tokens),0), COALESCE(sum(cache_write_tokens),0), "
            "COALESCE(sum(cost_usd),0) FROM usage WHERE created_at >= ?",
            (since,),
        )
        assert row is not None  # an aggregate always has its row
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]))

    async def usage_by_day(self, since: float, *, session_prefix: str = "") -> list[UsageDay]:
        rows = await self._db.fetchall(
            "SELECT date(created_at, 'unixepoch') AS day, model, sum(input_tokens), "
            "sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), "
            "sum(cost_usd) FROM usage WHERE created_at >= ? "
            "AND substr(session_key, 1, length(?)) = ? GROUP BY day, model "
            "ORDER BY day, model",
            (since, session_prefix, session_prefix),
        )
        return [
            UsageDay(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]))
            for r in rows
        ]


def _saving(
    session_key: str,
    messages: Iterable[Message],
    usage: Usage,
    run_id: str,
    model: str,
    context_tokens: int | None,
    origin: str | None,
    rejected: str = "",
) -> Callable[[sqlite3.Connection, str], None]:
    """A run's save, as a function to run on the database thread in one transaction: its
    messages, the session's totals and (if it cost anything) its ledger row."""
    now = time.time()
    rows = [(*encode_message(m), run_id, now, rejected) for m in messages]
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

    def save(db: sqlite3.Connection, session_id: str) -> None:
        if rows:
            db.executemany(
                "INSERT INTO messages (session_id, role, content, run_id, created_at, rejected) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(session_id, *row) for row in rows],
            )
        db.execute(
            "UPDATE sessions SET updated_at = ?, model = CASE WHEN ? = '' THEN model ELSE ? "
            "END, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
            "cache_read_tokens = cache_read_tokens + ?, "
            "cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?, "
            "context_tokens = COALESCE(?, context_tokens), origin = COALESCE(?, origin) "
            "WHERE id = ?",
            (*totals, session_id),
        )
        if charged:
            db.execute(
                "INSERT INTO usage (session_key, run_id, model, input_tokens, output_tokens,"
                " cache_read_tokens, cache_write_tokens, cost_usd, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ledger,
            )

    return save
