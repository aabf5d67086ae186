"""Opening the store: `open_store(where)` picks the backend for an address and migrates it.

A `postgresql://` URL opens `bot.store.postgres`, anything else is an SQLite file path
(`bot.store.sqlite`). This module sits above both backends; they import only the roles and
rows beneath it.
"""

from __future__ import annotations

from pathlib import Path

from bot.store.roles import Store
from bot.store.rows import INBOX_LEASE
from bot.store.urls import is_postgres_url


async def open_store(where: Path | str, *, lease: float = INBOX_LEASE) -> Store:
    """Open (and migrate) the store at a `postgresql://` URL or an SQLite file path.

    `lease`: seconds an inbox row or a claim stays with its instance without a beat."""
    if is_postgres_url(where):
        from bot.store.postgres.store import PostgresStore

        return await PostgresStore.open(str(where), lease=lease)
    from bot.store.sqlite.store import SQLiteStore

    return await SQLiteStore.open(where, lease=lease)
