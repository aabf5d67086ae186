"""SQLite schema (`PRAGMA user_version` migrations) and the connection every SQLite part shares.

`SQLiteBase` holds the one `SQLiteThread` (WAL mode, autocommit): each store method hands
the database thread one function, a multi-statement write one `transaction(...)` (BEGIN
IMMEDIATE .. COMMIT), so a write lands whole and writers never interleave (a turn's save was
five hand-offs, each a thread wake-up; see bench/README.md). `MIGRATIONS[i]` takes the schema
from version i to i+1; `prepare(path)` brings a fresh connection up to date, keeping a copy of
the file as it was before an upgrade, and refuses a database a newer Perch upgraded
(`SchemaTooNew`). Migrations only add (tables, columns with defaults, indexes), so a daemon
of the previous release keeps working on an upgraded file until it restarts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.store.rows import INBOX_LEASE, SchemaTooNew
from bot.store.sqlite.thread import SQLiteThread, in_transaction

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
    # 3: running daemons (for perch status) and who works on an inbox row, until when
    """
    ALTER TABLE inbox ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE inbox ADD COLUMN lease_until REAL NOT NULL DEFAULT 0;
    CREATE TABLE instances (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at REAL NOT NULL,
        seen_at REAL NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    """,
    # 4: the model a chat chose with /model
    """
    CREATE TABLE session_models (
        session_key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
    # 5: claims and stop requests (several instances only share PostgreSQL)
    """
    CREATE TABLE claims (
        name TEXT NOT NULL,
        slot REAL NOT NULL,
        holder TEXT NOT NULL,
        lease_until REAL NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        taken_at REAL NOT NULL,
        PRIMARY KEY (name, slot)
    );
    CREATE TABLE stops (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key TEXT NOT NULL,
        everything INTEGER NOT NULL,
        origin TEXT NOT NULL,
        at REAL NOT NULL
    );
    """,
    # 6: the search index over memory notes, conversations and skills (sqlite/search.py)
    """
    CREATE TABLE search_docs (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        ref TEXT NOT NULL,
        grp TEXT NOT NULL,
        scope TEXT NOT NULL,
        title TEXT NOT NULL,
        text TEXT NOT NULL,
        terms TEXT NOT NULL,
        length INTEGER NOT NULL,
        at REAL NOT NULL,
        UNIQUE (source, ref)
    );
    CREATE INDEX search_docs_by_group ON search_docs(source, grp);
    CREATE VIRTUAL TABLE search_fts USING fts5(
        tokens, content='', tokenize='unicode61 remove_diacritics 0'
    );
    CREATE TABLE search_terms (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE search_totals (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        docs INTEGER NOT NULL,
        length INTEGER NOT NULL
    );
    INSERT INTO search_totals (one, docs, length) VALUES (1, 0, 0);
    CREATE TABLE search_groups (
        source TEXT NOT NULL,
        grp TEXT NOT NULL,
        stamp TEXT NOT NULL,
        PRIMARY KEY (source, grp)
    );
    """,
    # 7: recall's embeddings: vectors by space and text digest (sqlite/vectors.py)
    """
    CREATE TABLE search_vectors (
        space TEXT NOT NULL,
        digest TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (space, digest)
    ) WITHOUT ROWID;
    """,
    # 8: a run the model API rejected for good stays stored, marked with the API's reason,
    # and leaves the history a turn sends (agents/model.py `ModelError.rejected_for_good`)
    """
    ALTER TABLE messages ADD COLUMN rejected TEXT NOT NULL DEFAULT '';
    CREATE INDEX messages_kept ON messages(session_id, id) WHERE rejected = '';
    """,
    # 9: approvals for risky tools, requests and decisions (sqlite/approvals.py)
    """
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        session_key TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT '',
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        requester TEXT NOT NULL DEFAULT '',
        approver TEXT NOT NULL DEFAULT '',
        instance TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT NOT NULL DEFAULT '',
        decided_at REAL,
        reason TEXT NOT NULL DEFAULT '',
        remembered INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX approvals_by_time ON approvals(created_at);
    CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
    """,
    # 10: what channels keep across restarts (an IMAP cursor)
    """
    CREATE TABLE channel_state (
        channel TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (channel, name)
    );
    """,
]


class SQLiteBase:
    """The shared connection; the store's parts (sessions, queues, claims) build on it."""

    def __init__(self, db: SQLiteThread, path: Path, lease: float = INBOX_LEASE) -> None:
        self._db = db
        self.path = path
        self.holder = ""  # this daemon's instance id once `hold_instance()` succeeded
        self.lease = lease
        self.shared = False


def keep_before_upgrade(conn: sqlite3.Connection, path: Path, current: int) -> Path:
    """A copy of the database as it is (schema `current`), taken before migrating it:
    `<name>.schema<current>.bak` beside it (the newest such copy of each schema is kept)."""
    target = path.with_name(f"{path.name}.schema{current}.bak")
    partial = target.with_name(target.name + ".partial")
    copy = sqlite3.connect(partial)
    try:
        conn.backup(copy)
    finally:
        copy.close()
    partial.replace(target)  # whole or not at all
    return target


def statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """On the database thread: WAL, the connection's settings, and the schema migrated to
    `len(MIGRATIONS)`, each version in a transaction of its own."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if current > len(MIGRATIONS):
        raise SchemaTooNew(str(path), current, len(MIGRATIONS))
    if 0 < current < len(MIGRATIONS) and str(path) != ":memory:":
        keep_before_upgrade(conn, path, current)
    for version in range(current, len(MIGRATIONS)):

        def migrate(conn: sqlite3.Connection, version: int = version) -> None:
            for statement in statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")

        in_transaction(conn, migrate)
