"""SQLite: the inbox, pairing requests and cron jobs (part of `SQLiteStore`).

The inbox is written before a message is processed (UNIQUE on channel, account, chat,
message id: a redelivered message is dropped) and closed when its run ends; rows still
pending at start are crash leftovers. `cron_changes` is `PRAGMA data_version`, which changes
when another connection (e.g. `perch cron add` in another process) commits.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from bot.store.rows import CronJobRow, CronRun, InboxRow, InstanceRow, PairingRequest
from bot.store.sqlite.base import SQLiteBase

_CRON_COLUMNS = (
    "id, name, schedule_kind, schedule, tz, message, session_mode, deliver_to, enabled, "
    "created_at, created_by, next_run_at, last_run_at, last_status, last_error, failures"
)
_INSERT_RUN = (
    "INSERT INTO cron_runs (job_id, started_at, finished_at, status, detail) VALUES (?, ?, ?, ?, ?)"
)


def _job(row: Any) -> CronJobRow:
    return CronJobRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], bool(row[8]),
        row[9], row[10], row[11], row[12], row[13], row[14], row[15],
    )  # fmt: skip


_INBOX_COLUMNS = "id, channel, account, chat_id, message_id, session_key, payload, received_at"


def _inbox(r: Any) -> InboxRow:
    return InboxRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7])


def _run_params(run: CronRun) -> tuple[Any, ...]:
    return (run.job_id, run.started_at, run.finished_at, run.status, run.detail)


class SQLiteQueues(SQLiteBase):
    # -- inbox --------------------------------------------------------------------------

    async def inbox_add(
        self,
        channel: str,
        account: str,
        chat_id: str,
        message_id: str,
        payload: dict[str, Any],
        session_key: str = "",
        *,
        received_at: float | None = None,
    ) -> int | None:
        now = time.time()
        done = await self._db.execute(
            "INSERT OR IGNORE INTO inbox (channel, account, chat_id, message_id, "
            "session_key, payload, received_at, owner, lease_until) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                channel,
                account,
                chat_id,
                message_id,
                session_key,
                json.dumps(payload, ensure_ascii=False),
                now if received_at is None else received_at,
                self.holder,
                now + self.lease if self.holder else 0.0,
            ),
            quick=True,  # on every message's way in
        )
        return done.lastrowid if done.rowcount == 1 else None

    async def inbox_claim(self, now: float | None = None) -> list[InboxRow]:
        now = time.time() if now is None else now
        rows = await self._db.fetchall(
            "UPDATE inbox SET owner = ?, lease_until = ? "
            "WHERE status = 'pending' AND lease_until < ? AND (owner <> ? OR ? = '') "
            "RETURNING " + _INBOX_COLUMNS,
            (self.holder, now + self.lease, now, self.holder, self.holder),
        )
        return sorted((_inbox(r) for r in rows), key=lambda r: r.id)

    async def inbox_close(self, ids: Iterable[int], status: str = "done") -> None:
        params = [(status, time.time(), i) for i in ids]
        if not params:
            return

        def close(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE inbox SET status = ?, done_at = ? WHERE id = ? AND status = 'pending'",
                params,
            )

        await self._db.transaction(close, quick=True)  # as every turn ends

    async def inbox_pending(self) -> list[InboxRow]:
        rows = await self._db.fetchall(
            f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE status = 'pending' ORDER BY id"
        )
        return [_inbox(r) for r in rows]

    async def inbox_prune(self, older_than: float) -> None:
        await self._db.execute(
            "DELETE FROM inbox WHERE status != 'pending' AND received_at < ?", (older_than,)
        )

    # -- pairing ------------------------------------------------------------------------

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        row = await self._db.fetchone(
            "SELECT 1 FROM approved_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
        )
        return row is not None

    async def pairing_requests(self, channel: str | None = None) -> list[PairingRequest]:
        now = time.time()
        sql = "SELECT channel, code, sender_id, sender_name, created_at, expires_at FROM pairing"
        sql += " WHERE expires_at > ?" + (" AND channel = ?" if channel else "")
        params: tuple[Any, ...] = (now, channel) if channel else (now,)
        rows = await self._db.fetchall(sql + " ORDER BY created_at", params)
        return [PairingRequest(*r) for r in rows]

    async def pairing_add(self, request: PairingRequest) -> None:
        def add(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM pairing WHERE expires_at <= ?", (time.time(),))
            db.execute(
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

        await self._db.transaction(add)

    async def pairing_approve(self, channel: str, code: str) -> PairingRequest | None:
        code = code.strip().upper()

        def approve(db: sqlite3.Connection) -> PairingRequest | None:
            row = db.execute(
                "SELECT channel, code, sender_id, sender_name, created_at, expires_at "
                "FROM pairing WHERE channel = ? AND code = ? AND expires_at > ?",
                (channel, code, time.time()),
            ).fetchone()
            if row is None:
                return None
            request = PairingRequest(*row)
            db.execute(
                "INSERT OR REPLACE INTO approved_senders (channel, sender_id, approved_at) "
                "VALUES (?, ?, ?)",
                (channel, request.sender_id, time.time()),
            )
            db.execute(
                "DELETE FROM pairing WHERE channel = ? AND sender_id = ?",
                (channel, request.sender_id),
            )
            return request

        return await self._db.transaction(approve)

    async def approved_senders(self, channel: str | None = None) -> list[tuple[str, str, float]]:
        sql = "SELECT channel, sender_id, approved_at FROM approved_senders"
        params: tuple[Any, ...] = (channel,) if channel else ()
        sql += " WHERE channel = ?" if channel else ""
        rows = await self._db.fetchall(sql + " ORDER BY channel, approved_at", params)
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    async def pairing_revoke(self, channel: str, sender_id: str) -> bool:
        done = await self._db.execute(
            "DELETE FROM approved_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
        )
        return done.rowcount > 0

    async def pairing_deny(self, channel: str, code: str) -> PairingRequest | None:
        code = code.strip().upper()

        def deny(db: sqlite3.Connection) -> PairingRequest | None:
            row = db.execute(
                "SELECT channel, code, sender_id, sender_name, created_at, expires_at "
                "FROM pairing WHERE channel = ? AND code = ? AND expires_at > ?",
                (channel, code, time.time()),
            ).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM pairing WHERE channel = ? AND code = ?", (channel, code))
            return PairingRequest(*row)

        return await self._db.transaction(deny)

    # -- cron -----------------------------------------------------------------------------

    async def cron_insert(self, job: CronJobRow) -> None:
        await self._db.execute(
            f"INSERT INTO cron_jobs ({_CRON_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.id, job.name, job.schedule_kind, job.schedule, job.tz, job.message,
                job.session_mode, job.deliver_to, int(job.enabled), job.created_at,
                job.created_by, job.next_run_at, job.last_run_at, job.last_status,
                job.last_error, job.failures,
            ),
        )  # fmt: skip

    async def cron_get(self, job_id: str) -> CronJobRow | None:
        row = await self._db.fetchone(
            f"SELECT {_CRON_COLUMNS} FROM cron_jobs WHERE id = ?", (job_id,)
        )
        return None if row is None else _job(row)

    async def cron_all(self) -> list[CronJobRow]:
        rows = await self._db.fetchall(
            f"SELECT {_CRON_COLUMNS} FROM cron_jobs ORDER BY created_at, id"
        )
        return [_job(r) for r in rows]

    async def cron_count_enabled(self) -> int:
        row = await self._db.fetchone("SELECT count(*) FROM cron_jobs WHERE enabled = 1")
        return 0 if row is None else int(row[0])

    async def cron_remove(self, job_id: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            removed = db.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,)).rowcount
            db.execute("DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
            return removed > 0

        return await self._db.transaction(remove)

    async def cron_update(
        self,
        job_id: str,
        *,
        enabled: bool,
        next_run_at: float | None,
        failures: int,
        last_run_at: float | None = None,
        last_status: str | None = None,
        last_error: str | None = None,
        run: CronRun | None = None,
    ) -> bool:
        def update(db: sqlite3.Connection) -> bool:
            if run is not None:
                db.execute(_INSERT_RUN, _run_params(run))
            changed = db.execute(
                "UPDATE cron_jobs SET enabled = ?, next_run_at = ?, failures = ?, "
                "last_run_at = COALESCE(?, last_run_at), "
                "last_status = COALESCE(?, last_status), "
                "last_error = COALESCE(?, last_error) WHERE id = ?",
                (int(enabled), next_run_at, failures, last_run_at, last_status, last_error, job_id),
            ).rowcount
            return changed > 0

        return await self._db.transaction(update)

    async def cron_record_run(self, run: CronRun) -> None:
        await self._db.execute(_INSERT_RUN, _run_params(run))

    async def cron_runs(self, job_id: str, limit: int = 20) -> list[CronRun]:
        rows = await self._db.fetchall(
            "SELECT job_id, started_at, finished_at, status, detail FROM cron_runs "
            "WHERE job_id = ? ORDER BY id DESC LIMIT ?",
            (job_id, limit),
        )
        return [CronRun(r[0], r[1], r[2] or r[1], r[3], r[4]) for r in rows]

    async def cron_changes(self) -> int:
        row = await self._db.fetchone("PRAGMA data_version")
        return 0 if row is None else int(row[0])

    # -- instances ------------------------------------------------------------------------

    async def instance_beat(self, instance: InstanceRow) -> None:
        until = instance.seen_at + self.lease
        detail = json.dumps(instance.detail, ensure_ascii=False)

        def beat(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE inbox SET lease_until = ? WHERE owner = ? AND status = 'pending'",
                (until, instance.id),
            )
            db.execute(
                "UPDATE claims SET lease_until = ? WHERE holder = ? AND NOT done",
                (until, instance.id),
            )
            db.execute(
                "INSERT INTO instances (id, host, pid, started_at, seen_at, detail) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "seen_at = excluded.seen_at, detail = excluded.detail",
                (instance.id, instance.host, instance.pid, instance.started_at,
                 instance.seen_at, detail),
            )  # fmt: skip

        await self._db.transaction(beat)

    async def instance_gone(self, instance_id: str) -> None:
        def gone(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE inbox SET lease_until = 0 WHERE owner = ? AND status = 'pending'",
                (instance_id,),
            )
            db.execute("DELETE FROM claims WHERE holder = ? AND NOT done", (instance_id,))
            db.execute("DELETE FROM instances WHERE id = ?", (instance_id,))

        await self._db.transaction(gone)

    async def instances(self, seen_since: float) -> list[InstanceRow]:
        rows = await self._db.fetchall(
            "SELECT id, host, pid, started_at, seen_at, detail FROM instances "
            "WHERE seen_at >= ? ORDER BY started_at, id",
            (seen_since,),
        )
        return [InstanceRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]
