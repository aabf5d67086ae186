"""PostgreSQL: recall's embeddings (part of `PostgresStore`): vectors by space and digest.

`search_vectors` keeps each vector (float32 bytes in a `bytea`) under the space it belongs
to (provider, model, size) and the digest of the text it was made from, so a changed text
or a changed model finds no vector and gets a new one (`bot/recall/vectors.py`); derived
data, as the index is: `perch store migrate` does not copy it. `search_documents` reads a
source's documents back for them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from bot.store.postgres.base import PostgresBase
from bot.store.search_rows import SearchDocument, SearchSource


class PostgresVectors(PostgresBase):
    async def search_documents(self, source: SearchSource) -> list[SearchDocument]:
        rows = await self._pool.fetch(
            "SELECT source, ref, grp, scope, title, text, at FROM search_docs "
            "WHERE source = $1 ORDER BY id",
            source,
        )
        return [SearchDocument(r[0], r[1], r[2], r[3], r[4], r[5], float(r[6])) for r in rows]

    async def save_vectors(self, space: str, vectors: Mapping[str, bytes]) -> None:
        if not vectors:
            return
        await self._pool.execute(
            "INSERT INTO search_vectors (space, digest, vector) "
            "SELECT $1, * FROM unnest($2::text[], $3::bytea[]) "
            "ON CONFLICT (space, digest) DO UPDATE SET vector = excluded.vector",
            space,
            list(vectors),
            list(vectors.values()),
        )

    async def load_vectors(self, space: str) -> dict[str, bytes]:
        rows = await self._pool.fetch(
            "SELECT digest, vector FROM search_vectors WHERE space = $1", space
        )
        return {str(r["digest"]): bytes(r["vector"]) for r in rows}

    async def drop_vectors(self, space: str, digests: Collection[str]) -> None:
        if digests:
            await self._pool.execute(
                "DELETE FROM search_vectors WHERE space = $1 AND digest = ANY($2::text[])",
                space,
                list(digests),
            )

    async def clear_vectors(self, keep: str | None = None) -> None:
        if keep is None:
            await self._pool.execute("DELETE FROM search_vectors")
        else:
            await self._pool.execute("DELETE FROM search_vectors WHERE space <> $1", keep)
