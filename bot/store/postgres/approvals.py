"""PostgreSQL: approval requests and their decisions, the audit (part of `PostgresStore`)."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from bot.store.postgres.base import PostgresBase
from bot.store.rows import APPROVAL_COLUMNS, ApprovalRow, ApprovalStatus

_COLUMNS = ", ".join(APPROVAL_COLUMNS)


def _row(record: Any) -> ApprovalRow:
    return ApprovalRow(*tuple(record))


class PostgresApprovals(PostgresBase):
    async def approval_add(self, row: ApprovalRow) -> None:
        marks = ", ".join(f"${i}" for i in range(1, len(APPROVAL_COLUMNS) + 1))
        await self._pool.execute(
            f"INSERT INTO approvals ({_COLUMNS}) VALUES ({marks})",
            *(getattr(row, c) for c in APPROVAL_COLUMNS),
        )

    async def approval_decide(
        self,
        approval_id: str,
        status: ApprovalStatus,
        decided_by: str,
        reason: str = "",
        *,
        remembered: bool = False,
        at: float | None = None,
    ) -> ApprovalRow | None:
        record = await self._pool.fetchrow(
            "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3, reason = $4, "
            f"remembered = $5 WHERE id = $6 AND status = 'pending' RETURNING {_COLUMNS}",
            status,
            decided_by,
            time.time() if at is None else at,
            reason,
            remembered,
            approval_id,
        )
        return None if record is None else _row(record)

    async def approval_get(self, approval_id: str) -> ApprovalRow | None:
        record = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM approvals WHERE id = $1", approval_id
        )
        return None if record is None else _row(record)

    async def approvals(self, limit: int = 100) -> list[ApprovalRow]:
        records = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM approvals ORDER BY created_at DESC, seq DESC LIMIT $1", limit
        )
        return [_row(r) for r in records]

    async def approvals_abandon(
        self, keep: Collection[str], reason: str, at: float | None = None
    ) -> list[ApprovalRow]:
        records = await self._pool.fetch(
            "UPDATE approvals SET status = 'restart', decided_at = $1, reason = $2 "
            "WHERE status = 'pending' AND NOT (instance = ANY($3::text[])) "
            f"RETURNING {_COLUMNS}",
            time.time() if at is None else at,
            reason,
            list(keep),
        )
        return [_row(r) for r in records]
