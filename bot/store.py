"""SQLite persistence through aiosqlite: sessions, messages, inbox, usage, pairing, cron jobs.

One connection in WAL mode; the schema is versioned with `PRAGMA user_version` and upgraded
by the ordered `MIGRATIONS` on open. Every multi-statement write runs inside `_transaction()`
(an asyncio lock plus BEGIN IMMEDIATE/COMMIT), so a run's messages land together or not at
all and concurrent runs never interleave half-turns. Message content is stored as the JSON
list of Anthropic-shaped blocks, in order.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from agents.model import Message, Usage

MIGRATIONS: list[str] = [
    # 1: the foundation
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        archived INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        compactions INTEGER NOT NULL DEFAULT 0,
        model TEXT NOT NULL DEFAULT '',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        origin TEXT NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX sessions_active_key ON sessions(key) WHERE archived = 0;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        run_id TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_session ON messages(session_id, id);
    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        session_key TEXT NOT NULL DEFAULT '',
        payload TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        received_at REAL NOT NULL,
        done_at REAL,
        UNIQUE (channel, account, chat_id, message_id)
    );
    CREATE INDEX inbox_pending ON inbox(status) WHERE status = 'pending';
    CREATE TABLE usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key TEXT NOT NULL,
        run_id TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX usage_by_time ON usage(created_at);
    CREATE TABLE pairing (
        channel TEXT NOT NULL,
        code TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        sender_name TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (channel, code)
    );
    CREATE TABLE approved_senders (
        channel TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        approved_at REAL NOT NULL,
        PRIMARY KEY (channel, sender_id)
    );
    """,
    # 2: scheduler
    """
    CREATE TABLE cron_jobs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL DEFAULT '',
        schedule_kind TEXT NOT NULL CHECK (schedule_kind IN ('at', 'every', 'cron')),
        schedule TEXT NOT NULL,
        tz TEXT NOT NULL DEFAULT 'UTC',
        message TEXT NOT NULL,
        session_mode TEXT NOT NULL DEFAULT 'isolated',
        session_key TEXT NOT NULL DEFAULT '',
        deliver_to TEXT NOT NULL DEFAULT '',
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        created_by TEXT NOT NULL DEFAULT '',
        next_run_at REAL,
        last_run_at REAL,
        last_status TEXT NOT NULL DEFAULT '',
        last_error TEXT NOT NULL DEFAULT '',
        failures INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE cron_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX cron_runs_by_job ON cron_runs(job_id, id);
    """,
]


@dataclass(slots=True)
class SessionRow:
    id: str
    key: str
    summary: str
    compactions: int
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    context_tokens: int
    origin: str
    created_at: float
    updated_at: float


@dataclass(slots=True)
class InboxRow:
    id: int
    channel: str
    account: str
    chat_id: str
    message_id: str
    session_key: str
    payload: dict[str, Any]
    received_at: float


@dataclass(slots=True)
class PairingRequest:
    channel: str
    code: str
    sender_id: str
    sender_name: str
    created_at: float
    expires_at: float


_SESSION_COLUMNS = (
    "id, key, summary, compactions, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd, context_tokens, origin, created_at, updated_at"
)


def _check_openable(path: Path) -> None:
    """Raise sqlite3's own error if `path` cannot be opened as a database."""
    sqlite3.connect(path).close()


class Store:
    """The daemon's database. Open with `await Store.open(path)`; close with `close()`."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str) -> Store:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
            # Fail here, not inside aiosqlite: a failed aiosqlite connect leaves its worker
            # thread to report to an event loop that may be closed by then.
            _check_openable(path)
        db = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            db.row_factory = aiosqlite.Row
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            store = cls(db, path)
            await store._migrate()
        except BaseException:
            await db.close()  # the database thread ends with the failed open
            raise
        return store

    async def close(self) -> None:
        async with self._lock:
            await self._db.close()

    async def schema_version(self) -> int:
        async with self._db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def _migrate(self) -> None:
        current = await self.schema_version()
        if current > len(MIGRATIONS):
            raise RuntimeError(
                f"{self.path}: database schema {current} is newer than this Perch "
                f"({len(MIGRATIONS)}); upgrade Perch or restore a backup"
            )
        for version in range(current, len(MIGRATIONS)):
            async with self._transaction() as db:
                for statement in _statements(MIGRATIONS[version]):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version + 1}")

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            else:
                await self._db.execute("COMMIT")

    # -- sessions -----------------------------------------------------------------------

    async def session(self, key: str) -> SessionRow:
        """The active session for `key`, created empty on first use."""
        row = await self._fetch_session(key)
        if row is not None:
            return row
        now = time.time()
        async with self._lock:
            await self._db.execute(
                "INSERT OR IGNORE INTO sessions (id, key, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (uuid.uuid4().hex, key, now, now),
            )
        row = await self._fetch_session(key)
        assert row is not None
        return row

    async def find_session(self, key: str) -> SessionRow | None:
        return await self._fetch_session(key)

    async def _fetch_session(self, key: str) -> SessionRow | None:
        # Per-turn reads use execute_fetchall: one hop to the database thread instead of
        # three (execute, fetch, close).
        rows = await self._db.execute_fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ? AND archived = 0", (key,)
        )
        return next((SessionRow(*row) for row in rows), None)

    async def list_sessions(self, limit: int = 100, *, archived: bool = False) -> list[SessionRow]:
        """Most recent first; with `archived`, archived conversations (`/new`) too."""
        where = "" if archived else "WHERE archived = 0 "
        async with self._db.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions {where}ORDER BY updated_at DESC LIMIT ?",
            (limit,),
        ) as cur:
            rows = await cur.fetchall()
        return [SessionRow(*r) for r in rows]

    async def messages(self, session_id: str) -> list[Message]:
        rows = await self._db.execute_fetchall(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [{"role": role, "content": json.loads(content)} for role, content in rows]

    async def messages_with_ids(self, session_id: str) -> list[tuple[int, Message]]:
        async with self._db.execute(
            "SELECT id, role, content FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ) as cur:
            rows = await cur.fetchall()
        return [(i, {"role": role, "content": json.loads(c)}) for i, role, c in rows]

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
        """Write one run's messages and usage in a single transaction."""
        now = time.time()
        rows = [
            (session_id, m["role"], json.dumps(m["content"], ensure_ascii=False), run_id, now)
            for m in messages
        ]
        async with self._transaction() as db:
            if rows:
                await db.executemany(
                    "INSERT INTO messages (session_id, role, content, run_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
            await db.execute(
                "UPDATE sessions SET updated_at = ?, model = CASE WHEN ? = '' THEN model ELSE ? "
                "END, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                "cache_read_tokens = cache_read_tokens + ?, "
                "cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?, "
                "context_tokens = COALESCE(?, context_tokens), origin = COALESCE(?, origin) "
                "WHERE id = ?",
                (
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
                ),
            )
            if usage.input_tokens or usage.output_tokens or usage.cost_usd:
                await db.execute(
                    "INSERT INTO usage (session_key, run_id, model, input_tokens, output_tokens,"
                    " cache_read_tokens, cache_write_tokens, cost_usd, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        session_key,
                        run_id,
                        model,
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cache_read_tokens,
                        usage.cache_write_tokens,
                        usage.cost_usd,
                        now,
                    ),
                )

    async def add_session_totals(self, keys: Iterable[str], usage: Usage) -> None:
        """Add usage already in the ledger (a sub-agent's) to other sessions' totals."""
        keys = list(keys)
        if not keys:
            return
        marks = ", ".join("?" for _ in keys)
        await self.execute(
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
        """Add usage (e.g. a sub-agent's) to a session's totals without new messages."""
        session = await self.session(session_key)
        await self.save_run(session.id, session_key, (), usage=usage, model=model)

    async def compact(self, session_id: str, summary: str, upto_id: int) -> int:
        """Replace messages up to and including `upto_id` by `summary`; returns rows removed.

        Messages saved after the summarised ones (a concurrent run's) are kept.
        """
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

    async def archive_session(self, key: str) -> bool:
        """`/new`: keep the old session (archived) and let the next message start fresh."""
        async with self._lock:
            cur = await self._db.execute(
                "UPDATE sessions SET archived = 1, updated_at = ? WHERE key = ? AND archived = 0",
                (time.time(), key),
            )
        return cur.rowcount > 0

    async def reset_session(self, key: str) -> bool:
        """`/reset`: clear the session's history and summary in place (usage totals stay)."""
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

    async def usage_since(self, since: float) -> Usage:
        async with self._db.execute(
            "SELECT COALESCE(sum(input_tokens),0), COALESCE(sum(output_tokens),0), "
            "COALESCE(sum(cache_read_tokens),0), COALESCE(sum(cache_write_tokens),0), "
            "COALESCE(sum(cost_usd),0) FROM usage WHERE created_at >= ?",
            (since,),
        ) as cur:
            row = await cur.fetchone()
        assert row is not None
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]))

    # -- inbox --------------------------------------------------------------------------

    async def inbox_add(
        self,
        channel: str,
        account: str,
        chat_id: str,
        message_id: str,
        payload: dict[str, Any],
        session_key: str = "",
    ) -> int | None:
        """Record an accepted message before processing; None if it was seen before."""
        async with self._lock:
            cur = await self._db.execute(
                "INSERT OR IGNORE INTO inbox (channel, account, chat_id, message_id, "
                "session_key, payload, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    channel,
                    account,
                    chat_id,
                    message_id,
                    session_key,
                    json.dumps(payload, ensure_ascii=False),
                    time.time(),
                ),
            )
        return cur.lastrowid if cur.rowcount == 1 else None

    async def inbox_close(self, ids: Iterable[int], status: str = "done") -> None:
        params = [(status, time.time(), i) for i in ids]
        if not params:
            return
        async with self._lock:
            await self._db.executemany(
                "UPDATE inbox SET status = ?, done_at = ? WHERE id = ? AND status = 'pending'",
                params,
            )

    async def inbox_pending(self) -> list[InboxRow]:
        async with self._db.execute(
            "SELECT id, channel, account, chat_id, message_id, session_key, payload, received_at"
            " FROM inbox WHERE status = 'pending' ORDER BY id"
        ) as cur:
            rows = await cur.fetchall()
        return [InboxRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7]) for r in rows]

    async def inbox_prune(self, older_than: float) -> None:
        """Forget closed inbox rows (dedupe only needs recent ids)."""
        async with self._lock:
            await self._db.execute(
                "DELETE FROM inbox WHERE status != 'pending' AND received_at < ?", (older_than,)
            )

    # -- pairing ------------------------------------------------------------------------

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        rows = await self._db.execute_fetchall(
            "SELECT 1 FROM approved_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
        )
        return bool(rows)

    async def pairing_requests(self, channel: str | None = None) -> list[PairingRequest]:
        now = time.time()
        sql = "SELECT channel, code, sender_id, sender_name, created_at, expires_at FROM pairing"
        sql += " WHERE expires_at > ?" + (" AND channel = ?" if channel else "")
        params: tuple[Any, ...] = (now, channel) if channel else (now,)
        async with self._db.execute(sql + " ORDER BY created_at", params) as cur:
            rows = await cur.fetchall()
        return [PairingRequest(*r) for r in rows]

    async def pairing_add(self, request: PairingRequest) -> None:
        async with self._transaction() as db:
            await db.execute("DELETE FROM pairing WHERE expires_at <= ?", (time.time(),))
            await db.execute(
                "INSERT INTO pairing (channel, code, sender_id, sender_name, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    request.channel,
                    request.code,
                    request.sender_id,
                    request.sender_name,
                    request.created_at,
                    request.expires_at,
                ),
            )

    async def pairing_approve(self, channel: str, code: str) -> PairingRequest | None:
        """Approve a pending code: the sender may write from now on."""
        code = code.strip().upper()
        async with self._transaction() as db:
            async with db.execute(
                "SELECT channel, code, sender_id, sender_name, created_at, expires_at "
                "FROM pairing WHERE channel = ? AND code = ? AND expires_at > ?",
                (channel, code, time.time()),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                return None
            request = PairingRequest(*row)
            await db.execute(
                "INSERT OR REPLACE INTO approved_senders (channel, sender_id, approved_at) "
                "VALUES (?, ?, ?)",
                (channel, request.sender_id, time.time()),
            )
            await db.execute(
                "DELETE FROM pairing WHERE channel = ? AND sender_id = ?",
                (channel, request.sender_id),
            )
        return request

    async def approved_senders(self, channel: str | None = None) -> list[tuple[str, str, float]]:
        """(channel, sender id, approved at) of every sender approved by pairing."""
        sql = "SELECT channel, sender_id, approved_at FROM approved_senders"
        params: tuple[Any, ...] = (channel,) if channel else ()
        sql += " WHERE channel = ?" if channel else ""
        rows = await self._db.execute_fetchall(sql + " ORDER BY channel, approved_at", params)
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    async def pairing_revoke(self, channel: str, sender_id: str) -> bool:
        """Withdraw an approval; False if the sender was not approved."""
        async with self._transaction() as db:
            cur = await db.execute(
                "DELETE FROM approved_senders WHERE channel = ? AND sender_id = ?",
                (channel, sender_id),
            )
        return cur.rowcount > 0

    # -- generic access for the scheduler ------------------------------------------------

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """One write statement under the writer lock; returns the affected row count."""
        async with self._lock:
            cur = await self._db.execute(sql, tuple(params))
        return cur.rowcount

    async def execute_all(self, statements: Iterable[tuple[str, Iterable[Any]]]) -> list[int]:
        """Several write statements in one transaction; their affected row counts."""
        counts: list[int] = []
        async with self._transaction() as db:
            for sql, params in statements:
                cur = await db.execute(sql, tuple(params))
                counts.append(cur.rowcount)
        return counts

    async def fetch_all(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._db.execute(sql, tuple(params)) as cur:
            rows = await cur.fetchall()
        return [tuple(r) for r in rows]


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
