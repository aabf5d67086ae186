"""One agent's view of the shared search index: nothing of one agent is found by another.

The store holds one search table for the whole daemon. Each agent's `SearchIndex` talks to
it through an `AgentSearch`, which keeps the agents apart by naming:
- the main agent's documents keep their names (an existing store reads as it did);
- another agent's groups and refs are stored as `@<id>/<name>`, and its `public` and
  `owner` scopes as `public@<id>` and `owner@<id>` (a chat's scope is its session key,
  which names the agent already). Its vectors live in the space `<space>@<id>`.
Every search asks only for the viewing agent's scopes, and every hit, stamp and document
list is filtered to the agent's own groups before it is given back, names restored, so
even the operator's every-scope search of one agent shows nothing of another. A rebuild of
the conversations reads only the agent's own sessions (`dump`).
`clear_search` of another agent forgets only its stamped groups (memory files, skills); the
main agent's clears the table (its rebuild indexes what it owns again; the others re-index
their files at their next refresh).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import replace

from bot.recall.index import IndexStore
from bot.recall.visibility import OWNER, PUBLIC
from bot.store.rows import CopyRow
from bot.store.search_rows import SearchDocument, SearchHit, SearchQuery, SearchSource

MARK = "@"


class AgentSearch:
    """`store`'s search role as agent `agent_id` sees it (`main` when it is the main one)."""

    def __init__(self, store: IndexStore, agent_id: str, *, main: bool, alone: bool) -> None:
        self.store = store
        self.alone = alone  # no other agent shares the store's vectors
        self.agent_id = agent_id
        self.main = main
        self._prefix = f"{MARK}{agent_id}/"

    # -- names -----------------------------------------------------------------------------

    def _name(self, name: str) -> str:
        return name if self.main else self._prefix + name

    def _owns(self, name: str) -> bool:
        return not name.startswith(MARK) if self.main else name.startswith(self._prefix)

    def _unname(self, name: str) -> str:
        return name if self.main else name[len(self._prefix) :]

    def _scope(self, scope: str) -> str:
        if self.main or scope not in (PUBLIC, OWNER):
            return scope
        return f"{scope}{MARK}{self.agent_id}"

    def _unscope(self, scope: str) -> str:
        if self.main:
            return scope
        for plain in (PUBLIC, OWNER):
            if scope == f"{plain}{MARK}{self.agent_id}":
                return plain
        return scope

    def _store_doc(self, doc: SearchDocument) -> SearchDocument:
        if self.main:
            return doc
        return replace(
            doc, ref=self._name(doc.ref), group=self._name(doc.group), scope=self._scope(doc.scope)
        )

    def _shown_doc(self, doc: SearchDocument) -> SearchDocument:
        if self.main:
            return doc
        return replace(
            doc,
            ref=self._unname(doc.ref),
            group=self._unname(doc.group),
            scope=self._unscope(doc.scope),
        )

    def _space(self, space: str) -> str:
        return space if self.main else f"{space}{MARK}{self.agent_id}"

    # -- Search ----------------------------------------------------------------------------

    async def index_documents(self, documents: Sequence[SearchDocument]) -> None:
        await self.store.index_documents([self._store_doc(d) for d in documents])

    async def replace_group(
        self, source: SearchSource, group: str, documents: Sequence[SearchDocument], stamp: str
    ) -> None:
        docs = [self._store_doc(d) for d in documents]
        await self.store.replace_group(source, self._name(group), docs, stamp)

    async def remove_group(self, source: SearchSource, group: str) -> int:
        return await self.store.remove_group(source, self._name(group))

    async def search_stamps(self, source: SearchSource) -> dict[str, str]:
        stamps = await self.store.search_stamps(source)
        return {self._unname(g): s for g, s in stamps.items() if self._owns(g)}

    async def search(self, query: SearchQuery) -> list[SearchHit]:
        asked = replace(
            query,
            scopes=None if query.scopes is None else tuple(self._scope(s) for s in query.scopes),
            exclude_groups=tuple(self._name(g) for g in query.exclude_groups),
        )
        hits = await self.store.search(asked)
        return [
            replace(hit, document=self._shown_doc(hit.document))
            for hit in hits
            if self._owns(hit.document.group)
        ]

    async def clear_search(self, source: SearchSource | None = None) -> None:
        if self.main:
            await self.store.clear_search(source)
            return
        sources: tuple[SearchSource, ...] = (
            (source,) if source is not None else ("memory", "skills", "sessions")
        )
        for each in sources:
            for group in await self.search_stamps(each):
                await self.remove_group(each, group)

    async def search_counts(self) -> dict[str, int]:
        return await self.store.search_counts()

    async def search_documents(self, source: SearchSource) -> list[SearchDocument]:
        docs = await self.store.search_documents(source)
        return [self._shown_doc(d) for d in docs if self._owns(d.group)]

    async def save_vectors(self, space: str, vectors: Mapping[str, bytes]) -> None:
        await self.store.save_vectors(self._space(space), vectors)

    async def load_vectors(self, space: str) -> dict[str, bytes]:
        return await self.store.load_vectors(self._space(space))

    async def drop_vectors(self, space: str, digests: Collection[str]) -> None:
        await self.store.drop_vectors(self._space(space), digests)

    async def clear_vectors(self, keep: str | None = None) -> None:
        """Passed on only when one agent is configured: with several, each agent's spaces stay
        (a space of a model no longer used is then kept until `perch memory rebuild`)."""
        if self.main and self.alone:
            await self.store.clear_vectors(keep)

    # -- Copying (read by a rebuild of the conversations) ------------------------------------

    async def is_empty(self) -> bool:
        return await self.store.is_empty()

    def dump(self, table: str, batch: int = 500) -> AsyncIterator[list[CopyRow]]:
        """Every row of `table`; of `sessions`, only this agent's (a rebuild of the
        conversations indexes no other agent's, whose messages then find no session)."""
        if table != "sessions":
            return self.store.dump(table, batch)
        return self._own_sessions(batch)

    async def _own_sessions(self, batch: int) -> AsyncIterator[list[CopyRow]]:
        prefix = f"agent:{self.agent_id}:"
        async for rows in self.store.dump("sessions", batch):
            yield [row for row in rows if str(row[1]).startswith(prefix)]

    async def load(self, table: str, rows: list[CopyRow]) -> None:
        await self.store.load(table, rows)

    async def finish_load(self) -> None:
        await self.store.finish_load()
