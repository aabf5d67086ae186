"""PostgreSQL: the search index (part of `PostgresStore`), on full-text search.

`search_docs` holds the documents with their terms (`bot/store/search_text.py`) and a
generated `tsvector` of them (the `simple` configuration: the terms are stemmed already;
each also behind its scope's prefix, `indexed_tokens`) under a GIN index; `search_terms` counts the documents holding each term and
`search_totals` the documents and their length, which `score` needs and `ts_rank_cd` does
not use. Every change holds the index's advisory lock for its transaction, so instances
indexing at once take turns: a document two of them add at once is replaced, not doubled. A search reads the counts of the
query's terms, then the candidates by `ts_rank_cd` among the visible documents (the rarest
terms only, `retrieval_terms`), scored by `bot.store.search_rows.score`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from bot.store.postgres.base import PostgresBase
from bot.store.search_rows import (
    CANDIDATES,
    IndexStats,
    SearchDocument,
    SearchHit,
    SearchQuery,
    SearchSource,
    ranked,
    retrieval_terms,
)
from bot.store.search_text import scope_prefix

T = TypeVar("T")
SEARCH_LOCK = 0x70657265  # advisory lock key of the index's writes ("pere")
_FORGET = "DELETE FROM search_docs WHERE {where} RETURNING terms, length"


async def _forget(
    conn: asyncpg.Connection, where: str, *params: Any
) -> tuple[Counter[str], int, int]:
    """Remove the documents `where` picks: (the terms they held, how many, their length)."""
    rows = await conn.fetch(_FORGET.format(where=where), *params)
    held: Counter[str] = Counter()
    for row in rows:
        held.update(set(row["terms"].split()))
    return held, len(rows), sum(int(r["length"]) for r in rows)


async def _add(
    conn: asyncpg.Connection, prepared: list[tuple[SearchDocument, list[str]]]
) -> tuple[Counter[str], int, int]:
    """Add documents, replacing any of the same (source, ref): (the terms' changes, the
    change of the number of documents, of their length)."""
    if not prepared:
        return Counter(), 0, 0
    docs = [doc for doc, _ in prepared]
    removed, gone, gone_length = await _forget(
        conn,
        "(source, ref) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
        [d.source for d in docs],
        [d.ref for d in docs],
    )
    await conn.execute(
        "INSERT INTO search_docs (source, ref, grp, scope, title, text, terms, length, at) "
        "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], "
        "$6::text[], $7::text[], $8::int[], $9::float8[])",
        [d.source for d in docs],
        [d.ref for d in docs],
        [d.group for d in docs],
        [d.scope for d in docs],
        [d.title.replace("\x00", "") for d in docs],
        [d.stored_text for d in docs],
        [" ".join(terms) for _, terms in prepared],
        [len(terms) for _, terms in prepared],
        [d.at for d in docs],
    )
    held: Counter[str] = Counter()
    for _, terms in prepared:
        held.update(set(terms))
    held.subtract(removed)
    length = sum(len(t) for _, t in prepared) - gone_length
    return held, len(prepared) - gone, length


async def _count(conn: asyncpg.Connection, held: Counter[str], docs: int, length: int) -> None:
    """Apply the changes of the terms' document counts (in term order), then the totals."""
    changes = sorted((t, n) for t, n in held.items() if n)
    if changes:
        await conn.execute(
            "INSERT INTO search_terms (term, docs) "
            "SELECT * FROM unnest($1::text[], $2::bigint[]) ORDER BY 1 "
            "ON CONFLICT (term) DO UPDATE SET docs = search_terms.docs + excluded.docs",
            [t for t, _ in changes],
            [n for _, n in changes],
        )
        await conn.execute(
            "DELETE FROM search_terms WHERE term = ANY($1::text[]) AND docs <= 0",
            [t for t, n in changes if n < 0],
        )
    if docs or length:
        await conn.execute(
            "UPDATE search_totals SET docs = docs + $1, length = length + $2", docs, length
        )


class PostgresSearch(PostgresBase):
    async def _locked(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` in a transaction holding the index's write lock: instances write the index
        one at a time (each write is short), so the same document added by two of them at
        once is replaced, never doubled, and the counts never deadlock."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SEARCH_LOCK)
            return await work(conn)

    async def index_documents(self, documents: Sequence[SearchDocument]) -> None:
        if not documents:
            return
        latest = {(d.source, d.ref): d for d in documents}  # the last of a (source, ref) wins
        prepared = [(doc, doc.terms) for doc in latest.values()]

        async def index(conn: asyncpg.Connection) -> None:
            await _count(conn, *await _add(conn, prepared))

        await self._locked(index)

    async def replace_group(
        self, source: SearchSource, group: str, documents: Sequence[SearchDocument], stamp: str
    ) -> None:
        latest = {(d.source, d.ref): d for d in documents}
        prepared = [(doc, doc.terms) for doc in latest.values()]

        async def replace(conn: asyncpg.Connection) -> None:
            held, docs, length = await _forget(conn, "source = $1 AND grp = $2", source, group)
            added, more, longer = await _add(conn, prepared)
            added.subtract(held)
            await _count(conn, added, more - docs, longer - length)
            await conn.execute(
                "INSERT INTO search_groups (source, grp, stamp) VALUES ($1, $2, $3) "
                "ON CONFLICT (source, grp) DO UPDATE SET stamp = excluded.stamp",
                source,
                group,
                stamp,
            )

        await self._locked(replace)

    async def remove_group(self, source: SearchSource, group: str) -> int:
        async def remove(conn: asyncpg.Connection) -> int:
            held, docs, length = await _forget(conn, "source = $1 AND grp = $2", source, group)
            held = Counter({t: -n for t, n in held.items()})
            await _count(conn, held, -docs, -length)
            await conn.execute(
                "DELETE FROM search_groups WHERE source = $1 AND grp = $2", source, group
            )
            return docs

        return await self._locked(remove)

    async def search_stamps(self, source: SearchSource) -> dict[str, str]:
        rows = await self._pool.fetch(
            "SELECT grp, stamp FROM search_groups WHERE source = $1", source
        )
        return {str(r["grp"]): str(r["stamp"]) for r in rows}

    async def search(self, query: SearchQuery) -> list[SearchHit]:
        if not query.terms:
            return []
        async with self._pool.acquire() as conn:
            totals = await conn.fetchrow("SELECT docs, length FROM search_totals")
            held = await conn.fetch(
                "SELECT term, docs FROM search_terms WHERE term = ANY($1::text[])",
                query.all_terms,
            )
            stats = IndexStats(
                int(totals["docs"]),
                int(totals["length"]),
                {r["term"]: int(r["docs"]) for r in held},
            )
            fetching = retrieval_terms(query, stats)
            if not fetching or query.scopes == () or not query.sources:
                return []
            where = ["tsv @@ q", "source = ANY($2::text[])"]
            prefixes = [""] if query.scopes is None else [scope_prefix(s) for s in query.scopes]
            tokens = [p + t for p in prefixes for t in fetching]
            params: list[Any] = [" | ".join(f"'{t}'" for t in tokens), list(query.sources)]
            if query.scopes is not None:
                params.append(list(query.scopes))
                where.append(f"scope = ANY(${len(params)}::text[])")
            if query.exclude_groups:
                params.append(list(query.exclude_groups))
                where.append(f"grp <> ALL(${len(params)}::text[])")
            rows = await conn.fetch(
                "SELECT source, ref, grp, scope, title, text, at, terms, ts_rank_cd(tsv, q) AS rank "
                f"FROM search_docs, to_tsquery('simple', $1) AS q WHERE {' AND '.join(where)} "
                f"ORDER BY rank DESC LIMIT {CANDIDATES}",
                *params,
            )
        return ranked(query, stats, [tuple(r) for r in rows])

    async def clear_search(self, source: SearchSource | None = None) -> None:
        async def clear(conn: asyncpg.Connection) -> None:
            if source is None:
                await conn.execute("DELETE FROM search_docs")
                await conn.execute("DELETE FROM search_terms")
                await conn.execute("UPDATE search_totals SET docs = 0, length = 0")
                await conn.execute("DELETE FROM search_groups")
                return
            held, docs, length = await _forget(conn, "source = $1", source)
            await _count(conn, Counter({t: -n for t, n in held.items()}), -docs, -length)
            await conn.execute("DELETE FROM search_groups WHERE source = $1", source)

        await self._locked(clear)

    async def search_counts(self) -> dict[str, int]:
        rows = await self._pool.fetch("SELECT source, count(*) FROM search_docs GROUP BY source")
        return {str(r[0]): int(r[1]) for r in rows}
