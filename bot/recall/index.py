"""The search index kept current: `SearchIndex` over the store's `Search` role.

- memory files: `refresh()` (each turn, each search) compares files' stamps with the ones
  they were indexed with and indexes a changed file again, whole, in one transaction; a file
  gone is forgotten. Every file is looked at (one lstat each) when `memory/` itself changed
  (a file added, removed or replaced: what `write_file` and `edit_file` do), or `RESCAN_S`
  after the last look; in between, `MEMORY.md` and the `RECENT` newest files, where
  `memory_append` writes. So a turn costs a few lstats however many days of notes there are,
  and an append to an old file by other means (exec) counts within `RESCAN_S`;
- skills: when the catalog's generation moves, the usable skills are indexed again if their
  stamp (a digest of their text) changed;
- conversations: `index_run` right after a run is saved (a chat turn's, a sub-agent's; the
  time and what recall put before the user's words left out) keeps its documents, which are
  written a moment later with the other runs' of that second, in one transaction
  (`bot/recall/pending.py`); a search that could find one of them writes them first.
  Compaction removes messages from the history, not from the index; a rebuild indexes what
  the store holds then (the sessions' summaries too). A crash loses the runs not written yet
  from the index until a rebuild.
`rebuild()` makes all of it again from the workspace and the store (`perch memory rebuild`);
`ensure_built()` does the conversations once for a store that has never had them indexed
(one from before the index, or just migrated), in the background at start. Indexing never
fails a turn: a problem is logged and the index catches up on the next change.

It is also what the memory tools and `skill_search` search through (`search_memory`,
`find_skills`), each chat seeing only what `bot/recall/visibility.py` lets it.

With `agent.recall.embeddings` set (`from_config`), a `VectorIndex` (`bot/recall/vectors.py`)
is told of every memory and skills group written, embeds them in the background (a run's
memory writes are looked for right after it is saved, so they are embedded before the next
message), and every search ranks the words' candidates and the nearest notes and skills
together (`bot/recall/hybrid.py`); when the embeddings fail, by words alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agents.model import Message
from agents.recall import Recalled
from agents.skills.catalog import SkillCatalog
from bot.kernel.sessions import SessionKey
from bot.recall.documents import (
    SKILLS_GROUP,
    conversation_documents,
    memory_notes,
    message_document,
    skill_documents,
    summary_document,
)
from bot.recall.hybrid import blend
from bot.recall.memory_files import (
    MEMORY_FILE,
    MemoryFile,
    folder_stamp,
    memory_stamps,
    read_memory,
    some_stamps,
)
from bot.recall.pending import PendingDocuments
from bot.recall.visibility import Owners, describe, scope_of, visible_scopes
from bot.store.roles import Copying
from bot.store.rows import decode_message
from bot.store.search_role import Search
from bot.store.search_rows import CANDIDATES, SearchDocument, SearchHit, SearchQuery
from bot.store.search_text import snippet

if TYPE_CHECKING:
    from bot.config.schema import Config
    from bot.recall.vectors import VectorIndex  # numpy: loaded only where embeddings are on

log = logging.getLogger(__name__)

BUILT = ":built"  # the stamp-only group of `sessions`: conversations indexed from the store
BATCH = 500
TOOL_MIN_SCORE = 0.15  # what memory_search and skill_search show (the model asked)
RESCAN_S = 30.0  # every memory file is looked at again after this
RECENT = 3  # the newest memory files looked at on every turn


class IndexStore(Search, Copying, Protocol):
    """What the index uses of the store: the search role, and reading every stored row."""


class SearchIndex:
    def __init__(
        self,
        store: IndexStore,
        workspace: Path,
        skills: SkillCatalog | None = None,
        owners: Owners | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rescan_s: float = RESCAN_S,
        vectors: VectorIndex | None = None,
    ) -> None:
        self.store = store
        self.rescan_s = rescan_s  # every memory file is looked at again after this
        self.workspace = workspace
        self.skills = skills
        self.owners: Owners = owners or {}
        self.clock = clock
        self._memory: dict[str, str] | None = None  # path -> stamp as indexed
        self._files: dict[str, MemoryFile] = {}  # as last looked at
        self._folder = ""  # memory/'s stamp at the last full look
        self._looked = float("-inf")  # when (time.monotonic)
        self._skills_generation = -1
        self._syncing = asyncio.Lock()
        self.vectors = vectors  # hybrid ranking, when embeddings are configured
        self.pending = PendingDocuments(store.index_documents)  # runs' documents, not written yet

    @classmethod
    def from_config(
        cls,
        config: Config,
        store: IndexStore,
        skills: SkillCatalog | None = None,
        owners: Owners | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rescan_s: float = RESCAN_S,
    ) -> SearchIndex:
        """The index of `config`'s workspace, with vectors when `agent.recall.embeddings`
        names a provider. Raises ConfigError naming the key when it names no usable one."""
        from bot.config.embeddings import embeddings_endpoint
        from bot.config.errors import ConfigError
        from bot.recall.embedder import Embedder
        from bot.recall.vectors import VectorIndex

        try:
            endpoint = embeddings_endpoint(config.agent.recall.embeddings, config.providers)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        settings = config.agent.recall.embeddings
        vectors = None
        if endpoint is not None and settings is not None:
            vectors = VectorIndex(store, Embedder(endpoint), settings)
        return cls(
            store, config.workspace, skills, owners, clock=clock, rescan_s=rescan_s, vectors=vectors
        )

    async def aclose(self) -> None:
        await self.pending.close()
        if self.vectors is not None:
            await self.vectors.aclose()

    async def settle(self) -> None:
        """Write the runs' documents that wait, and wait for the background embedding (if
        any) to end."""
        await self.pending.flush()
        if self.vectors is not None:
            await self.vectors.settle()

    # -- keeping it current ----------------------------------------------------------------

    async def refresh(self) -> None:
        """Index what changed in the memory files and the skills (cheap when nothing did)."""
        async with self._syncing:
            try:
                await self._sync_memory()
                await self._sync_skills()
                if self.vectors is not None:
                    await self.vectors.load()  # once
            except Exception:
                log.exception("search index: could not bring memory files and skills up to date")

    async def _sync_memory(self, force: bool = False) -> None:
        if self._memory is None or force:
            self._memory = {} if force else await self.store.search_stamps("memory")
            self._looked = float("-inf")
        files = self._look()
        for path, file in files.items():
            if self._memory.get(path) == file.stamp:
                continue
            text = await asyncio.to_thread(read_memory, self.workspace, path)
            notes = memory_notes(path, text or "", file.mtime)
            await self.store.replace_group("memory", path, notes, file.stamp)
            self._memory[path] = file.stamp
            if self.vectors is not None:
                self.vectors.replaced("memory", path, notes)
        for path in [p for p in self._memory if p not in files]:
            await self.store.remove_group("memory", path)
            del self._memory[path]
            if self.vectors is not None:
                self.vectors.removed("memory", path)

    def _look(self) -> dict[str, MemoryFile]:
        """The memory files now: all of them, or the few that change between full looks."""
        folder = folder_stamp(self.workspace)
        now = time.monotonic()
        if folder != self._folder or now - self._looked >= self.rescan_s:
            self._files = memory_stamps(self.workspace)
            self._folder, self._looked = folder, now
            return self._files
        newest = sorted(self._files.values(), key=lambda f: f.mtime, reverse=True)[:RECENT]
        for path, file in some_stamps(
            self.workspace, [MEMORY_FILE, *(f.path for f in newest)]
        ).items():
            if file is None:
                self._files.pop(path, None)
            else:
                self._files[path] = file
        return self._files

    async def _sync_skills(self, force: bool = False) -> None:
        if self.skills is None:
            return
        found = self.skills.refresh()
        if self.skills.generation == self._skills_generation and not force:
            return
        docs, stamp = skill_documents(found)
        if force or (await self.store.search_stamps("skills")).get(SKILLS_GROUP) != stamp:
            await self.store.replace_group("skills", SKILLS_GROUP, docs, stamp)
            if self.vectors is not None:
                self.vectors.replaced("skills", SKILLS_GROUP, docs)
        self._skills_generation = self.skills.generation

    async def index_run(
        self, key: SessionKey, session_id: str, messages: Iterable[Message]
    ) -> None:
        """A saved run's messages, written with the next ones (never raises)."""
        try:
            await self.pending.add(conversation_documents(key, session_id, messages, self.clock()))
        except Exception:
            log.exception("search index: the run of %s could not be indexed", key)
        if self.vectors is not None:
            await self.refresh()  # the run's memory writes, embedded before the next message

    async def rebuild(self, progress: Callable[[str], None] | None = None) -> dict[str, int]:
        """Everything again, from the workspace and the store; the documents per source."""
        await self.pending.flush()
        async with self._syncing:
            await self.store.clear_search()
            await self._sync_memory(force=True)
            await self._sync_skills(force=True)
        await self._index_conversations(progress)
        counts = await self.store.search_counts()
        if self.vectors is not None:
            counts["vectors"] = await self.vectors.rebuild()
        return counts

    async def ensure_built(self) -> None:
        """Index the stored conversations once if they never were (never raises)."""
        try:
            if BUILT not in await self.store.search_stamps("sessions"):
                log.info("search index: indexing the stored conversations (once)")
                await self._index_conversations(None)
                log.info("search index: %s", await self.store.search_counts())
        except Exception:
            log.exception("search index: the stored conversations could not be indexed")

    async def _index_conversations(self, progress: Callable[[str], None] | None) -> None:
        await self.store.clear_search("sessions")
        keys: dict[str, SessionKey] = {}
        summaries: list[SearchDocument] = []
        async for rows in self.store.dump("sessions"):
            for row in rows:
                session_id, key_text, summary, updated = str(row[0]), str(row[1]), row[5], row[4]
                try:
                    keys[session_id] = SessionKey.parse(key_text)
                except ValueError:
                    continue
                if summary:
                    summaries.append(
                        summary_document(keys[session_id], session_id, summary, float(updated))
                    )
        await self.store.index_documents(summaries)
        done = 0
        async for rows in self.store.dump("messages", BATCH):
            docs = []
            for _, session_id, role, content, _, created_at, rejected in rows:
                key = keys.get(str(session_id))
                if key is None or rejected:  # a run the model API refused is not recalled
                    continue
                doc = message_document(
                    key, str(session_id), decode_message(role, content), created_at
                )
                if doc is not None:
                    docs.append(doc)
            await self.store.index_documents(docs)
            done += len(rows)
            if progress is not None:
                progress(f"{done:,} messages read")
        await self.store.replace_group("sessions", BUILT, [], str(self.clock()))

    # -- searching -------------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> list[SearchHit]:
        """The hits of `query`: by words, or by words and vectors together when embeddings
        are configured and answer (never raises for them)."""
        await self.pending.flush_for(query)  # it sees every run saved before it
        await self.refresh()
        if self.vectors is None or not query.text:
            return await self.store.search(query)
        wide = replace(query, limit=CANDIDATES, min_score=0.0)
        text_hits, near = await asyncio.gather(self.store.search(wide), self.vectors.nearest(query))
        if near is None:
            return [h for h in text_hits if h.score >= query.min_score][: query.limit]
        s = self.vectors.settings
        return blend(
            query,
            text_hits,
            near.top,
            near.cosine,
            weight=s.weight,
            floor=s.floor,
            ceiling=s.ceiling,
        )

    async def search_memory(
        self, query: str, *, session_key: str, limit: int, requester: str | None = None
    ) -> list[Recalled]:
        """`memory_search`: memory notes and conversations this chat may see, best first;
        `requester` wrote the message (the owner in a DM channel of its own, see
        `visible_scopes`)."""
        try:
            key = SessionKey.parse(session_key)
        except ValueError:
            return []
        asked = SearchQuery.of(
            query,
            sources=("memory", "sessions"),
            scopes=visible_scopes(key, self.owners, requester),
            limit=limit,
            min_score=TOOL_MIN_SCORE,
        )
        return [recalled(hit, key, 600) for hit in await self.search(asked)]

    async def find_skills(self, query: str, limit: int) -> list[tuple[str, float]]:
        """`skill_search`: the names of the skills that match best, with their scores."""
        asked = SearchQuery.of(
            query, sources=("skills",), scopes=None, limit=limit, min_score=TOOL_MIN_SCORE
        )
        return [(hit.document.ref, hit.score) for hit in await self.search(asked)]


def recalled(hit: SearchHit, viewer: SessionKey, limit: int) -> Recalled:
    """A hit as recall and memory_search show it to a turn of `viewer`."""
    doc = hit.document
    text = snippet(doc.text, hit.matched, limit)
    if doc.source == "memory":
        return Recalled("memory", doc.title, doc.at, text)
    if doc.source == "skills":
        return Recalled("skills", f"skill {doc.ref} (read_skill has it all)", 0.0, text)
    if doc.scope == scope_of(viewer):
        chat = "this chat, earlier"
    elif doc.scope.startswith("agent:"):
        chat = describe(doc.scope)
    else:
        chat = "a scheduled run"
    who = {"user": "they said", "assistant": "you said", "summary": "summary"}.get(
        doc.title, doc.title
    )
    return Recalled("sessions", f"{chat}, {who}", doc.at, text)
