"""PostgreSQL: the inbox, pairing requests and cron jobs (part of `PostgresStore`).

The inbox's UNIQUE (channel, account, chat, message id) makes `inbox_add` write a platform
message once across every instance sharing the database. `cron_changes` is a counter that
every job write bumps in its own transaction (PostgreSQL has no `PRAGMA data_version`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from bot.store.postgres.base import PostgresBase, affected
from bot.store.rows import CronJobRow, CronRun, InboxRow, InstanceRow, PairingRequest

_CRON_COLUMNS = (
    "id, name, schedule_kind, schedule, tz, message, session_mode, deliver_to, enabled, "
    "created_at, created_by, next_run_at, last_run_at, last_status, last_error, failures"
)
_INSERT_RUN = (
    "INSERT INTO cron_runs (job_id, started_at, finished_at, status, detail) "
    "VALUES ($1, $2, $3, $4, $5)"
)
_BUMP = "UPDATE cron_changes SET n = n + 1"
_PAIRING = "channel, code, sender_id, sender_name, created_at, expires_at"


_INBOX_COLUMNS = "id, channel, account, chat_id, message_id, session_key, payload, received_at"


def _inbox(r: Any) -> InboxRow:
    return InboxRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7])


def _run_params(run: CronRun) -> tuple[Any, ...]:
    return (run.job_id, run.started_at, run.finished_at, run.status, run.detail)


class PostgresQueues(PostgresBase):
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
        row_id = await self._pool.fetchval(
            "INSERT INTO inbox (channel, account, chat_id, message_id, session_key, payload, "
            "received_at, owner, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
            "ON CONFLICT DO NOTHING RETURNING id",
            channel,
            account,
            chat_id,
            message_id,
            session_key,
            json.dumps(payload, ensure_ascii=False),
            now if received_at is None else received_at,
            self.holder,
            now + self.lease if self.holder else 0.0,
        )
        return int(row_id) if row_id is not None else None

    async def inbox_claim(self, now: float | None = None) -> list[InboxRow]:
        now = time.time() if now is None else now
        # SKIP LOCKED: rows another instance is claiming right now are left to it
        rows = await self._pool.fetch(
            "UPDATE inbox SET owner = $1, lease_until = $2 WHERE id IN (SELECT id FROM inbox "
            "WHERE status = 'pending' AND lease_until < $3 AND (owner <> $1 OR $1 = '') "
            "ORDER BY id FOR UPDATE SKIP LOCKED) "
            f"RETURNING {_INBOX_COLUMNS}",
            self.holder,
            now + self.lease,
            now,
        )
        return sorted((_inbox(r) for r in rows), key=lambda r: r.id)

    async def inbox_close(self, ids: Iterable[int], status: str = "done") -> None:
        ids = list(ids)
        if not ids:
            return
        await self._pool.execute(
            "UPDATE inbox SET status = $1, done_at = $2 "
            "WHERE id = ANY($3::bigint[]) AND status = 'pending'",
            status,
            time.time(),
            ids,
        )

    async def inbox_pending(self) -> list[InboxRow]:
        rows = await self._pool.fetch(
            f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE status = 'pending' ORDER BY id"
        )
        return [_inbox(r) for r in rows]

    async def inbox_prune(self, older_than: float) -> None:
        await self._pool.execute(
            "DELETE FROM inbox WHERE status != 'pending' AND received_at < $1", older_than
        )

    # -- pairing ------------------------------------------------------------------------

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        found = await self._pool.fetchval(
            "SELECT 1 FROM approved_senders WHERE channel = $1 AND sender_id = $2",
            channel,
            sender_id,
        )
        return found is not None

    async def pairing_requests(self, channel: str | None = None) -> list[PairingRequest]:
        rows = await self._pool.fetch(
            f"SELECT {_PAIRING} FROM pairing WHERE expires_at > $1 "
            "AND ($2::text IS NULL OR channel = $2) ORDER BY created_at",
            time.time(),
            channel or None,
        )
        return [PairingRequest(*r) for r in rows]

    async def pairing_add(self, request: PairingRequest) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM pairing WHERE expires_at <= $1", time.time())
            await conn.execute(
                f"INSERT INTO pairing ({_PAIRING}) VALUES ($1, $2, $3, $4, $5, $6)",
                request.channel,
                request.code,
                request.sender_id,
                request.sender_name,
                request.created_at,
                request.expires_at,
            )

    async def pairing_approve(self, channel: str, code: str) -> PairingRequest | None:
        code = code.strip().upper()
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"DELETE FROM pairing WHERE channel = $1 AND code = $2 AND expires_at > $3 "
                f"RETURNING {_PAIRING}",
                channel,
                code,
                time.time(),
            )
            if row is None:
                return None
            request = PairingRequest(*row)
            await conn.execute(
                "INSERT INTO approved_senders (channel, sender_id, approved_at) "
                "VALUES ($1, $2, $3) ON CONFLICT (channel, sender_id) "
                "DO UPDATE SET approved_at = excluded.approved_at",
                channel,
                request.sender_id,
                time.time(),
            )
            await conn.execute(
                "DELETE FROM pairing WHERE channel = $1 AND sender_id = $2",
                channel,
                request.sender_id,
            )
        return request

    async def approved_senders(self, channel: str | None = None) -> list[tuple[str, str, float]]:
        rows = await self._pool.fetch(
            "SELECT channel, sender_id, approved_at FROM approved_senders "
            "WHERE ($1::text IS NULL OR channel = $1) ORDER BY channel, approved_at",
            channel or None,
        )
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    async def pairing_revoke(self, channel: str, sender_id: str) -> bool:
        result = await self._pool.execute(
            "DELETE FROM approved_senders WHERE channel = $1 AND sender_id = $2",
            channel,
            sender_id,
        )
        return str(result).split()[-1] != "0"  # asyncpg returns the status tag, "DELETE n"

    async def pairing_deny(self, channel: str, code: str) -> PairingRequest | None:
        row = await self._pool.fetchrow(
            f"DELETE FROM pairing WHERE channel = $1 AND code = $2 AND expires_at > $3 "
            f"RETURNING {_PAIRING}",
            channel,
            code.strip().upper(),
            time.time(),
        )
        return PairingRequest(*row) if row is not None else None

    # -- cron -----------------------------------------------------------------------------

    async def cron_insert(self, job: CronJobRow) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                f"INSERT INTO cron_jobs ({_CRON_COLUMNS}) VALUES "
                "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
                job.id, job.name, job.schedule_kind, job.schedule, job.tz, job.message,
                job.session_mode, job.deliver_to, job.enabled, job.created_at,
                job.created_by, job.next_run_at, job.last_run_at, job.last_status,
                job.last_error, job.failures,
            )  # fmt: skip
            await conn.execute(_BUMP)

    async def cron_get(self, job_id: str) -> CronJobRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {_CRON_COLUMNS} FROM cron_jobs WHERE id = $1", job_id
        )
        return CronJobRow(*row) if row is not None else None

    async def cron_all(self) -> list[CronJobRow]:
        rows = await self._pool.fetch(
            f"SELECT {_CRON_COLUMNS} FROM cron_jobs ORDER BY created_at, id"
        )
        return [CronJobRow(*r) for r in rows]

    async def cron_count_enabled(self) -> int:
        return int(await self._pool.fetchval("SELECT count(*) FROM cron_jobs WHERE enabled"))

    async def cron_remove(self, job_id: str) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM cron_jobs WHERE id = $1", job_id)
            await conn.execute("DELETE FROM cron_runs WHERE job_id = $1", job_id)
            await conn.execute(_BUMP)
        return affected(status) > 0

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
        async with self._pool.acquire() as conn, conn.transaction():
            if run is not None:
                await conn.execute(_INSERT_RUN, *_run_params(run))
            status = await conn.execute(
                "UPDATE cron_jobs SET enabled = $2, next_run_at = $3, failures = $4, "
                "last_run_at = COALESCE($5, last_run_at), "
                "last_status = COALESCE($6, last_status), "
                "last_error = COALESCE($7, last_error) WHERE id = $1",
                job_id,
                enabled,
                next_run_at,
                failures,
                last_run_at,
                last_status,
                last_error,
            )
            await conn.execute(_BUMP)
        return affected(status) > 0

    async def cron_record_run(self, run: CronRun) -> None:
        await self._pool.execute(_INSERT_RUN, *_run_params(run))

    async def cron_runs(self, job_id: str, limit: int = 20) -> list[CronRun]:
        rows = await self._pool.fetch(
            "SELECT job_id, started_at, finished_at, status, detail FROM cron_runs "
            "WHERE job_id = $1 ORDER BY id DESC LIMIT $2",
            job_id,
            limit,
        )
        return [CronRun(r[0], r[1], r[2] if r[2] is not None else r[1], r[3], r[4]) for r in rows]

    async def cron_changes(self) -> int:
        return int(await self._pool.fetchval("SELECT n FROM cron_changes"))

    # -- instances ------------------------------------------------------------------------

    async def instance_beat(self, instance: InstanceRow) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE inbox SET lease_until = $1 WHERE owner = $2 AND status = 'pending'",
                instance.seen_at + self.lease,
                instance.id,
            )
            await conn.execute(
                "UPDATE claims SET lease_until = $1 WHERE holder = $2 AND NOT done",
                instance.seen_at + self.lease,
                instance.id,
            )
            await conn.execute(
                "INSERT INTO instances (id, host, pid, started_at, seen_at, detail) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET "
                "seen_at = excluded.seen_at, detail = excluded.detail",
                instance.id, instance.host, instance.pid, instance.started_at, instance.seen_at,
                json.dumps(instance.detail, ensure_ascii=False),
            )  # fmt: skip

    async def instance_gone(self, instance_id: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE inbox SET lease_until = 0 WHERE owner = $1 AND status = 'pending'",
                instance_id,
            )
            await conn.execute("DELETE FROM claims WHERE holder = $1 AND NOT done", instance_id)
            await conn.execute("DELETE FROM instances WHERE id = $1", instance_id)

    async def instances(self, seen_since: float) -> list[InstanceRow]:
        rows = await self._pool.fetch(
            "SELECT id, host, pid, started_at, seen_at, detail FROM instances "
            "WHERE seen_at >= $1 ORDER BY started_at, id",
            seen_since,
        )
        return [InstanceRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]
