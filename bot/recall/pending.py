"""A chat run's search documents, written to the index a moment after the run, many at once.

Indexing a run is a transaction of its own (FTS5 writes a segment per transaction, and the
term counts change): ~0.3 ms of CPU a turn when each run is written alone, well under half
of that per run when the runs of a second are written together (`bench/README.md`, issue
40). So `PendingDocuments.add` keeps a run's documents and writes them `after` seconds later
(or at once when `most` are waiting), in one transaction, off every turn's path.

Nothing is missed by waiting: `flush_for(query)` writes them before any search that could
find one of them (its source, a scope the query sees, a group it does not leave out), so a
search sees every run this instance saved before it (another instance on the same
PostgreSQL database sees them within `after`). What a crash takes with it is at most the last
second's runs, which a rebuild (`perch memory rebuild`) indexes again from the store; the
index was never more than that (a crash between a save and its indexing lost the run from it
before too). `close()` writes what is left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from bot.store.search_rows import SearchDocument, SearchQuery

log = logging.getLogger(__name__)

FLUSH_AFTER = 1.0  # seconds a run's documents wait to be written with the next ones
FLUSH_AT = 500  # documents written at once, whatever the time


class PendingDocuments:
    """The documents waiting to be written by `write` (the store's `index_documents`)."""

    def __init__(
        self,
        write: Callable[[Sequence[SearchDocument]], Awaitable[None]],
        *,
        after: float = FLUSH_AFTER,
        most: int = FLUSH_AT,
    ) -> None:
        self._write = write
        self.after = after
        self.most = most
        self._waiting: list[SearchDocument] = []
        self._writing: Sequence[SearchDocument] = ()
        # (source, scope) -> the groups of the documents waiting or being written: what a
        # query is checked against (a turn's search, however many runs wait)
        self._where: dict[tuple[str, str], set[str]] = {}
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._waiting) + len(self._writing)

    async def add(self, documents: Sequence[SearchDocument]) -> None:
        """Keep `documents` for the next write (made now if `most` are waiting)."""
        if not documents:
            return
        self._waiting.extend(documents)
        self._mark(documents)
        if len(self._waiting) >= self.most or self.after <= 0:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.after, self._due)

    def _mark(self, documents: Sequence[SearchDocument]) -> None:
        for doc in documents:
            self._where.setdefault((doc.source, doc.scope), set()).add(doc.group)

    def _due(self) -> None:
        self._timer = None
        task = asyncio.create_task(self.flush(), name="search-index-flush")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Write what waits, in one transaction (never raises: a failure is logged, and the
        documents are left out of the index until a rebuild, as a failed indexing was)."""
        async with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._waiting:
                return
            self._writing, self._waiting = self._waiting, []
            try:
                await self._write(self._writing)
            except Exception:
                log.exception("search index: %d documents could not be indexed", len(self._writing))
            finally:
                self._writing = ()
                self._where = {}
                self._mark(self._waiting)  # added while these were written

    async def flush_for(self, query: SearchQuery) -> None:
        """Write what waits if `query` could find any of it."""
        if self._where and _could_find(query, self._where):
            await self.flush()

    async def close(self) -> None:
        """Write what is left; no write is due after this."""
        await self.flush()
        for task in list(self._tasks):
            await task


def _could_find(query: SearchQuery, where: dict[tuple[str, str], set[str]]) -> bool:
    """Whether a document of one of `where`'s (source, scope) pairs and groups is of the
    query's sources, in a scope it sees and in a group it does not leave out."""
    if query.scopes is None:
        pairs = [pair for pair in where if pair[0] in query.sources]
    else:
        pairs = [(source, scope) for source in query.sources for scope in query.scopes]
    left_out = set(query.exclude_groups)
    return any(not where.get(pair, left_out) <= left_out for pair in pairs)
