"""PostgreSQL schema (its own migrations) and the connection pool every PostgreSQL part shares.

The schema version sits in `perch_schema`; `MIGRATIONS[i]` takes it from version i to i+1,
each in one transaction, under an advisory lock so instances starting together migrate once.
Message content and inbox payloads are stored as JSON text (not jsonb, which would reorder
keys), times as epoch seconds in double precision, as in the SQLite backend.
"""

from __future__ import annotations

import asyncpg

from bot.store.rows import INBOX_LEASE
from bot.store.urls import redact_url

MIGRATE_LOCK = 0x70657263  # advisory lock key held while migrating ("perc")
INSTANCE_LOCK = 0x70657264  # advisory lock class of `leadership(name)` (hashtext(name))

MIGRATIONS: list[str] = [
    # 1: the foundation and the scheduler (the SQLite backend's migrations 1 and 2)
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        archived BOOLEAN NOT NULL DEFAULT false,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        compactions INTEGER NOT NULL DEFAULT 0,
        model TEXT NOT NULL DEFAULT '',
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        context_tokens BIGINT NOT NULL DEFAULT 0,
        origin TEXT NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX sessions_active_key ON sessions(key) WHERE NOT archived;
    CREATE INDEX sessions_by_update ON sessions(updated_at) WHERE NOT archived;
    CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        run_id TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX messages_by_session ON messages(session_id, id);
    CREATE TABLE inbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        session_key TEXT NOT NULL DEFAULT '',
        payload TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        received_at DOUBLE PRECISION NOT NULL,
        done_at DOUBLE PRECISION,
        UNIQUE (channel, account, chat_id, message_id)
    );
    CREATE INDEX inbox_pending ON inbox(id) WHERE status = 'pending';
    CREATE TABLE usage (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_key TEXT NOT NULL,
        run_id TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX usage_by_time ON usage(created_at);
    CREATE TABLE pairing (
        channel TEXT NOT NULL,
        code TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        sender_name TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (channel, code)
    );
    CREATE TABLE approved_senders (
        channel TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        approved_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (channel, sender_id)
    );
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
        enabled BOOLEAN NOT NULL DEFAULT true,
        created_at DOUBLE PRECISION NOT NULL,
        created_by TEXT NOT NULL DEFAULT '',
        next_run_at DOUBLE PRECISION,
        last_run_at DOUBLE PRECISION,
        last_status TEXT NOT NULL DEFAULT '',
        last_error TEXT NOT NULL DEFAULT '',
        failures INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE cron_runs (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        status TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX cron_runs_by_job ON cron_runs(job_id, id);
    CREATE TABLE cron_changes (
        one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
        n BIGINT NOT NULL
    );
    INSERT INTO cron_changes (n) VALUES (0);
    """,
    # 2: running daemons (for perch status) and who works on an inbox row, until when
    """
    ALTER TABLE inbox ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE inbox ADD COLUMN lease_until DOUBLE PRECISION NOT NULL DEFAULT 0;
    CREATE TABLE instances (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        seen_at DOUBLE PRECISION NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    """,
    # 3: the model a chat chose with /model
    """
    CREATE TABLE session_models (
        session_key TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    """,
    # 4: claims across instances (cron slots, heartbeats, session slots; bot/claims.py) and
    # /stop requests for runs on other instances (bot/stops.py)
    """
    CREATE TABLE claims (
        name TEXT NOT NULL,
        slot DOUBLE PRECISION NOT NULL,
        holder TEXT NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL,
        done BOOLEAN NOT NULL DEFAULT false,
        taken_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (name, slot)
    );
    CREATE INDEX claims_by_holder ON claims(holder) WHERE NOT done;
    CREATE INDEX inbox_by_owner ON inbox(owner) WHERE status = 'pending';
    CREATE TABLE stops (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_key TEXT NOT NULL,
        everything BOOLEAN NOT NULL,
        origin TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL
    );
    """,
    # 5: the search index over memory notes, conversations and skills (postgres/search.py)
    """
    CREATE TABLE search_docs (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        source TEXT NOT NULL,
        ref TEXT NOT NULL,
        grp TEXT NOT NULL,
        scope TEXT NOT NULL,
        title TEXT NOT NULL,
        text TEXT NOT NULL,
        terms TEXT NOT NULL,
        length INTEGER NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        -- the terms, and each behind its scope's prefix (bot/store/search_text.py)
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', terms || ' ' || regexp_replace(
            terms, '(\\S+)', 's' || left(md5(scope), 10) || '\\1', 'g'))) STORED,
        UNIQUE (source, ref)
    );
    CREATE INDEX search_docs_terms ON search_docs USING gin (tsv);
    CREATE INDEX search_docs_by_group ON search_docs (source, grp);
    CREATE TABLE search_terms (term TEXT PRIMARY KEY, docs BIGINT NOT NULL);
    CREATE TABLE search_totals (
        one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
        docs BIGINT NOT NULL,
        length BIGINT NOT NULL
    );
    INSERT INTO search_totals (docs, length) VALUES (0, 0);
    CREATE TABLE search_groups (
        source TEXT NOT NULL,
        grp TEXT NOT NULL,
        stamp TEXT NOT NULL,
        PRIMARY KEY (source, grp)
    );
    """,
    # 6: recall's embeddings: vectors by space and text digest (postgres/vectors.py)
    """
    CREATE TABLE search_vectors (
        space TEXT NOT NULL,
        digest TEXT NOT NULL,
        vector BYTEA NOT NULL,
        PRIMARY KEY (space, digest)
    );
    """,
    # 7: a run the model API rejected for good stays stored, marked with the API's reason,
    # and leaves the history a turn sends (agents/model.py `ModelError.rejected_for_good`)
    """
    ALTER TABLE messages ADD COLUMN rejected TEXT NOT NULL DEFAULT '';
    CREATE INDEX messages_kept ON messages(session_id, id) WHERE rejected = '';
    """,
    # 8: approvals for risky tools, requests and decisions (postgres/approvals.py)
    """
    CREATE TABLE approvals (
        seq BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        session_key TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT '',
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        requester TEXT NOT NULL DEFAULT '',
        approver TEXT NOT NULL DEFAULT '',
        instance TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT NOT NULL DEFAULT '',
        decided_at DOUBLE PRECISION,
        reason TEXT NOT NULL DEFAULT '',
        remembered BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX approvals_by_time ON approvals(created_at);
    CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
    """,
    # 9: what channels keep across restarts (an IMAP cursor)
    """
    CREATE TABLE channel_state (
        channel TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (channel, name)
    );
    """,
]


def affected(status: str) -> int:
    """Rows affected, from a command status such as 'DELETE 3' or 'INSERT 0 1'."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class PostgresBase:
    """The shared pool; the store's parts (sessions, queues) build on it."""

    def __init__(self, pool: asyncpg.Pool, url: str, lease: float = INBOX_LEASE) -> None:
        self._pool = pool
        self.url = url
        self.holder = ""  # this daemon's instance id once `hold_instance()` succeeded
        self.lease = lease
        self.shared = True

    @property
    def location(self) -> str:
        return redact_url(self.url)
