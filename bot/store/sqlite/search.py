"""SQLite: the search index (part of `SQLiteStore`), on FTS5.

`search_docs` holds the documents with their terms (`bot/store/search_text.py`);
`search_fts` is a contentless FTS5 index of their `indexed_tokens` (a plain `unicode61`
tokenizer: the terms are stemmed already; each also behind its scope's prefix), kept in step
by this module in the same transaction as each change; `search_terms` counts the documents holding each term and
`search_totals` the documents and their length, which `score` needs and FTS5 would only
give by reading whole posting lists. A search is one hand-off to the database thread: the
counts of the query's terms, then the candidates by `bm25()` among the visible documents
(the rarest terms only, `retrieval_terms`, behind the prefixes of the scopes asked for), scored by `bot.store.search_rows.score`.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

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
from bot.store.search_text import indexed_tokens, scope_prefix
from bot.store.sqlite.base import SQLiteBase

_COLUMNS = "d.source, d.ref, d.grp, d.scope, d.title, d.text, d.at, d.terms"


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def _forget(db: sqlite3.Connection, where: str, params: Sequence[Any], held: Counter[str]) -> int:
    """Remove the documents `where` picks from the table, FTS5 and the totals; their terms'
    counts go down in `held`."""
    rows = db.execute(
        f"SELECT id, terms, length, scope FROM search_docs WHERE {where}", params
    ).fetchall()
    if not rows:
        return 0
    db.executemany(  # a contentless index forgets a row given what it indexed
        "INSERT INTO search_fts (search_fts, rowid, tokens) VALUES ('delete', ?, ?)",
        [(i, indexed_tokens(terms.split(), scope)) for i, terms, _, scope in rows],
    )
    db.executemany("DELETE FROM search_docs WHERE id = ?", [(r[0],) for r in rows])
    length = sum(r[2] for r in rows)
    db.execute("UPDATE search_totals SET docs = docs - ?, length = length - ?", (len(rows), length))
    for row in rows:
        held.subtract(set(row[1].split()))
    return len(rows)


Prepared = list[tuple[SearchDocument, list[str]]]  # documents with their terms


def _add(db: sqlite3.Connection, documents: Prepared, held: Counter[str]) -> None:
    length = 0
    for doc, terms in documents:
        _forget(db, "source = ? AND ref = ?", (doc.source, doc.ref), held)
        joined = " ".join(terms)
        cursor = db.execute(
            "INSERT INTO search_docs (source, ref, grp, scope, title, text, terms, length, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc.source, doc.ref, doc.group, doc.scope, doc.title.replace('\x00', ''), doc.stored_text,
             joined, len(terms), doc.at),
        )  # fmt: skip
        db.execute(
            "INSERT INTO search_fts (rowid, tokens) VALUES (?, ?)",
            (cursor.lastrowid, indexed_tokens(terms, doc.scope)),
        )
        held.update(set(terms))
        length += len(terms)
    db.execute(
        "UPDATE search_totals SET docs = docs + ?, length = length + ?", (len(documents), length)
    )


def _count(db: sqlite3.Connection, held: Counter[str]) -> None:
    """Apply the changes of the terms' document counts (in term order)."""
    changes = sorted((t, n) for t, n in held.items() if n)
    db.executemany(
        "INSERT INTO search_terms (term, docs) VALUES (?, ?) "
        "ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs",
        changes,
    )
    db.executemany(
        "DELETE FROM search_terms WHERE term = ? AND docs <= 0", [(t,) for t, n in changes if n < 0]
    )


def _stats(db: sqlite3.Connection, terms: Sequence[str]) -> IndexStats:
    docs, length = db.execute("SELECT docs, length FROM search_totals").fetchone()
    held = db.execute(
        f"SELECT term, docs FROM search_terms WHERE term IN ({_marks(terms)})", tuple(terms)
    ).fetchall()
    return IndexStats(int(docs), int(length), {t: int(n) for t, n in held})


def _candidates(db: sqlite3.Connection, query: SearchQuery) -> tuple[IndexStats, list[Any]]:
    stats = _stats(db, query.all_terms)
    fetching = retrieval_terms(query, stats)
    if not fetching or query.scopes == () or not query.sources:
        return stats, []
    where = [f"d.source IN ({_marks(query.sources)})"]
    prefixes = [""] if query.scopes is None else [scope_prefix(s) for s in query.scopes]
    tokens = [p + t for p in prefixes for t in fetching]
    params: list[Any] = [" OR ".join(f'"{t}"' for t in tokens), *query.sources]
    if query.scopes is not None:
        where.append(f"d.scope IN ({_marks(query.scopes)})")
        params += query.scopes
    if query.exclude_groups:
        where.append(f"d.grp NOT IN ({_marks(query.exclude_groups)})")
        params += query.exclude_groups
    rows = db.execute(
        f"SELECT {_COLUMNS}, bm25(search_fts) AS rank FROM search_fts "
        "JOIN search_docs d ON d.id = search_fts.rowid "
        f"WHERE search_fts MATCH ? AND {' AND '.join(where)} ORDER BY rank LIMIT ?",
        (*params, CANDIDATES),
    ).fetchall()
    return stats, rows


class SQLiteSearch(SQLiteBase):
    async def index_documents(self, documents: Sequence[SearchDocument]) -> None:
        if not documents:
            return

        prepared = [(doc, doc.terms) for doc in documents]  # stemmed here, not on its thread

        def index(db: sqlite3.Connection) -> None:
            held: Counter[str] = Counter()
            _add(db, prepared, held)
            _count(db, held)

        await self._db.transaction(index)

    async def replace_group(
        self, source: SearchSource, group: str, documents: Sequence[SearchDocument], stamp: str
    ) -> None:
        prepared = [(doc, doc.terms) for doc in documents]

        def replace(db: sqlite3.Connection) -> None:
            held: Counter[str] = Counter()
            _forget(db, "source = ? AND grp = ?", (source, group), held)
            _add(db, prepared, held)
            _count(db, held)
            db.execute(
                "INSERT INTO search_groups (source, grp, stamp) VALUES (?, ?, ?) "
                "ON CONFLICT (source, grp) DO UPDATE SET stamp = excluded.stamp",
                (source, group, stamp),
            )

        await self._db.transaction(replace)

    async def remove_group(self, source: SearchSource, group: str) -> int:
        def remove(db: sqlite3.Connection) -> int:
            held: Counter[str] = Counter()
            removed = _forget(db, "source = ? AND grp = ?", (source, group), held)
            _count(db, held)
            db.execute("DELETE FROM search_groups WHERE source = ? AND grp = ?", (source, group))
            return removed

        return await self._db.transaction(remove)

    async def search_stamps(self, source: SearchSource) -> dict[str, str]:
        rows = await self._db.fetchall(
            "SELECT grp, stamp FROM search_groups WHERE source = ?", (source,)
        )
        return {str(g): str(s) for g, s in rows}

    async def search(self, query: SearchQuery) -> list[SearchHit]:
        if not query.terms:
            return []
        stats, rows = await self._db.run(lambda db: _candidates(db, query), quick=True)
        return ranked(query, stats, rows)

    async def clear_search(self, source: SearchSource | None = None) -> None:
        def clear(db: sqlite3.Connection) -> None:
            if source is None:
                db.execute("DELETE FROM search_docs")
                db.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
                db.execute("DELETE FROM search_terms")
                db.execute("UPDATE search_totals SET docs = 0, length = 0")
                db.execute("DELETE FROM search_groups")
                return
            held: Counter[str] = Counter()
            _forget(db, "source = ?", (source,), held)
            _count(db, held)
            db.execute("DELETE FROM search_groups WHERE source = ?", (source,))

        await self._db.transaction(clear)

    async def search_counts(self) -> dict[str, int]:
        rows = await self._db.fetchall("SELECT source, count(*) FROM search_docs GROUP BY source")
        return {str(s): int(n) for s, n in rows}
