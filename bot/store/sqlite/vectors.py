"""SQLite: recall's embeddings (part of `SQLiteStore`): vectors by space and text digest.

`search_vectors` keeps each vector (float32 bytes) under the space it belongs to (provider,
model, size) and the digest of the text it was made from, so a changed text or a changed
model finds no vector and gets a new one (`bot/recall/vectors.py`); derived data, as the
index is: `perch store migrate` does not copy it. `search_documents` reads a source's
documents back for them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping

from bot.store.search_rows import SearchDocument, SearchSource
from bot.store.sqlite.base import SQLiteBase


class SQLiteVectors(SQLiteBase):
    async def search_documents(self, source: SearchSource) -> list[SearchDocument]:
        rows = await self._db.fetchall(
            "SELECT source, ref, grp, scope, title, text, at FROM search_docs "
            "WHERE source = ? ORDER BY id",
            (source,),
        )
        return [SearchDocument(s, r, g, sc, t, x, float(a)) for s, r, g, sc, t, x, a in rows]

    async def save_vectors(self, space: str, vectors: Mapping[str, bytes]) -> None:
        rows = [(space, digest, vector) for digest, vector in vectors.items()]

        def save(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT INTO search_vectors (space, digest, vector) VALUES (?, ?, ?) "
                "ON CONFLICT (space, digest) DO UPDATE SET vector = excluded.vector",
                rows,
            )

        if rows:
            await self._db.transaction(save)

    async def load_vectors(self, space: str) -> dict[str, bytes]:
        rows = await self._db.fetchall(
            "SELECT digest, vector FROM search_vectors WHERE space = ?", (space,)
        )
        return {str(d): bytes(v) for d, v in rows}

    async def drop_vectors(self, space: str, digests: Collection[str]) -> None:
        rows = [(space, digest) for digest in digests]

        def drop(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM search_vectors WHERE space = ? AND digest = ?", rows)

        if rows:
            await self._db.transaction(drop)

    async def clear_vectors(self, keep: str | None = None) -> None:
        if keep is None:
            await self._db.execute("DELETE FROM search_vectors")
        else:
            await self._db.execute("DELETE FROM search_vectors WHERE space <> ?", (keep,))
