"""SQLite: approval requests and their decisions, the audit (part of `SQLiteStore`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection
from typing import Any

from bot.store.rows import APPROVAL_COLUMNS, ApprovalRow, ApprovalStatus
from bot.store.sqlite.base import SQLiteBase

_COLUMNS = ", ".join(APPROVAL_COLUMNS)


def _row(values: tuple[Any, ...]) -> ApprovalRow:
    row = ApprovalRow(*values)
    row.remembered = bool(row.remembered)
    return row


class SQLiteApprovals(SQLiteBase):
    async def approval_add(self, row: ApprovalRow) -> None:
        values = tuple(getattr(row, c) for c in APPROVAL_COLUMNS)

        def add(db: sqlite3.Connection) -> None:
            marks = ", ".join("?" * len(APPROVAL_COLUMNS))
            db.execute(f"INSERT INTO approvals ({_COLUMNS}) VALUES ({marks})", values)

        await self._db.transaction(add)

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
        when = time.time() if at is None else at

        def decide(db: sqlite3.Connection) -> ApprovalRow | None:
            changed = db.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, reason = ?, "
                "remembered = ? WHERE id = ? AND status = 'pending'",
                (status, decided_by, when, reason, int(remembered), approval_id),
            ).rowcount
            if not changed:
                return None
            found = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,))
            return _row(found.fetchone())

        return await self._db.transaction(decide)

    async def approval_get(self, approval_id: str) -> ApprovalRow | None:
        row = await self._db.fetchone(
            f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)
        )
        return None if row is None else _row(tuple(row))

    async def approvals(self, limit: int = 100) -> list[ApprovalRow]:
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM approvals ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (limit,),
        )
        return [_row(tuple(r)) for r in rows]

    async def approvals_abandon(
        self, keep: Collection[str], reason: str, at: float | None = None
    ) -> list[ApprovalRow]:
        when = time.time() if at is None else at
        kept = list(keep)

        def abandon(db: sqlite3.Connection) -> list[ApprovalRow]:
            marks = ", ".join("?" * len(kept))
            where = (
                f"status = 'pending' AND instance NOT IN ({marks})"
                if kept
                else ("status = 'pending'")
            )
            found = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE {where}", kept)
            rows = [_row(tuple(r)) for r in found.fetchall()]
            db.execute(
                f"UPDATE approvals SET status = 'restart', decided_at = ?, reason = ? WHERE {where}",
                (when, reason, *kept),
            )
            for row in rows:
                row.status, row.decided_at, row.reason = "restart", when, reason
            return rows

        return await self._db.transaction(abandon)
