"""Recall's embeddings: the vectors of the memory notes and skills, one matrix in memory.

Only the small, curated sources get vectors (`VECTOR_SOURCES`: memory notes and skills):
that is where a question must find a note that shares no word with it ("which city is my
home?" and "I live in Lisbon"). Conversations stay ranked by their words: 100,000 messages
of vectors would fit neither a turn's time nor the daemon's memory.

`VectorIndex` is told of every group the search index writes or forgets (`replaced`,
`removed`) and embeds what has no vector yet in the background (`BATCH` texts a request),
never on a turn's path; each vector is stored (`Search.save_vectors`) under the space of the
provider, model and size and the digest of the text it was made from, so an edited note or
another model finds no vector and gets a new one, and none is ever stale. `load()` reads
the documents and their vectors once (vectors of another space are forgotten then).
`nearest(query)` embeds the question (the one request on a turn's path, bounded by
`timeout_s`) and returns the closest documents among those the query may see: the same
scopes, sources and groups as the words' search (`bot/recall/visibility.py` decides them).
A failure (down, an HTTP error, a malformed answer, a wrong size) is logged once, plainly;
recall then ranks by words alone, and the embeddings are tried again after `RETRY_S`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bot.config.embeddings import EmbeddingsConfig
from bot.recall.embedder import Embedder, EmbeddingFailed
from bot.store.search_role import Search
from bot.store.search_rows import CANDIDATES, SearchDocument, SearchQuery, SearchSource

log = logging.getLogger(__name__)

VECTOR_SOURCES: tuple[SearchSource, ...] = ("memory", "skills")
BATCH = 128  # texts a request while embedding in the background
BATCH_TIMEOUT_S = 60.0
RETRY_S = 60.0  # after a failure, the embeddings are left alone this long
Entry = tuple[SearchDocument, str]  # a document and its text's digest


def text_digest(doc: SearchDocument) -> str:
    """What a vector is kept under: the digest of the text it was made from."""
    return hashlib.blake2b(doc.stored_text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class _View:
    """The documents as arrays, made again after a change: row -1 has no vector yet."""

    docs: list[SearchDocument]
    rows: np.ndarray
    codes: dict[str, dict[str, int]]  # "scope" | "source" | "group" -> value -> code
    coded: dict[str, np.ndarray]  # the same three: each document's code
    position: dict[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class Nearness:
    """The closest visible documents (best first), and any visible document's cosine."""

    top: list[tuple[SearchDocument, float]]
    _cosines: np.ndarray
    _position: dict[tuple[str, str], int]

    def cosine(self, doc: SearchDocument) -> float | None:
        """None: `doc` has no vector (yet), or is not among what the query may see."""
        at = self._position.get((doc.source, doc.ref))
        if at is None or not np.isfinite(self._cosines[at]):
            return None
        return float(self._cosines[at])


class VectorIndex:
    def __init__(
        self,
        store: Search,
        embedder: Embedder,
        settings: EmbeddingsConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.space = embedder.endpoint.space
        self.clock = clock
        self._groups: dict[tuple[str, str], list[Entry]] | None = None  # None: not read yet
        self._rows: dict[str, int] = {}  # digest -> row of the matrix
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._used = 0  # rows of the matrix in use (some may be no document's any more)
        self._view: _View | None = None
        self._task: asyncio.Task[None] | None = None
        self._again = False  # a change came while the task ran
        self._unfinished = False  # the last embedding stopped at a failure
        self._failing = False
        self._quiet_until = float("-inf")
        self._loading = asyncio.Lock()

    # -- keeping it current ----------------------------------------------------------------

    async def load(self) -> None:
        """Read the documents and their vectors (once), then embed what has none."""
        async with self._loading:
            if self._groups is not None:
                return
            await self.store.clear_vectors(keep=self.space)  # another model's: never used
            groups: dict[tuple[str, str], list[Entry]] = {}
            for source in VECTOR_SOURCES:
                for doc in await self.store.search_documents(source):
                    groups.setdefault((doc.source, doc.group), []).append((doc, text_digest(doc)))
            stored = await self.store.load_vectors(self.space)
            live = self._digests(groups.values())
            self._groups = groups
            kept = {d: v for d, v in stored.items() if d in live}
            sizes = [len(v) for v in kept.values()]
            size = max(set(sizes), key=sizes.count) if sizes else 0
            usable = {d: v for d, v in kept.items() if len(v) == size}
            if usable:
                self._append(
                    list(usable),
                    np.frombuffer(b"".join(usable.values()), dtype="<f4").reshape(len(usable), -1),
                )
            gone = set(stored) - set(usable)
            if gone:
                await self.store.drop_vectors(self.space, gone)
            self._view = None
            self._schedule()

    def replaced(self, source: str, group: str, documents: Sequence[SearchDocument]) -> None:
        """The index wrote `group` anew (its documents, all of them)."""
        if self._groups is None or source not in VECTOR_SOURCES:
            return
        if documents:
            self._groups[(source, group)] = [(d, text_digest(d)) for d in documents]
        else:
            self._groups.pop((source, group), None)
        self._view = None
        self._schedule()

    def removed(self, source: str, group: str) -> None:
        self.replaced(source, group, [])

    async def rebuild(self) -> int:
        """Every vector made again (`perch memory rebuild`); how many documents have one."""
        await self.settle()
        await self.store.clear_vectors()
        self._groups, self._rows, self._used, self._view = None, {}, 0, None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._quiet_until = float("-inf")
        await self.load()
        await self.settle()
        return self.count()

    async def settle(self) -> None:
        """Wait for the background embedding, if it runs, to end."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def count(self) -> int:
        """How many documents have their vector."""
        groups = self._groups or {}
        return sum(digest in self._rows for entries in groups.values() for _, digest in entries)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.embedder.aclose()

    def _schedule(self) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        if self.clock() < self._quiet_until:
            self._unfinished = True
            return
        self._again, self._unfinished = False, False
        self._task = asyncio.create_task(self._embed_all())

    async def _embed_all(self) -> None:
        try:
            await self._embed_missing()
        except Exception:  # the store, most likely: tried again at the next change
            log.exception("recall embeddings: the vectors could not be kept")
            self._unfinished = True

    async def _embed_missing(self) -> None:
        while True:
            self._again = False
            missing = self._missing()
            for start in range(0, len(missing), BATCH):
                batch = missing[start : start + BATCH]
                try:
                    rows = await self.embedder.embed([t for _, t in batch], BATCH_TIMEOUT_S)
                except EmbeddingFailed as exc:
                    self._failed(str(exc))
                    self._unfinished = True
                    return
                self._answered()
                if not self._fits(rows):
                    self._unfinished = True
                    return
                digests = [d for d, _ in batch]
                await self.store.save_vectors(
                    self.space,
                    {d: row.astype("<f4").tobytes() for d, row in zip(digests, rows, strict=True)},
                )
                self._append(digests, rows)
            await self._forget_orphans()
            if not self._again:
                return

    def _missing(self) -> list[tuple[str, str]]:
        """(digest, text) of every document without a vector, each text once."""
        found: dict[str, str] = {}
        for entries in (self._groups or {}).values():
            for doc, digest in entries:
                if digest not in self._rows:
                    found.setdefault(digest, doc.stored_text)
        return list(found.items())

    @staticmethod
    def _digests(groups: Iterable[list[Entry]]) -> set[str]:
        return {digest for entries in groups for _, digest in entries}

    def _fits(self, rows: np.ndarray) -> bool:
        if self._used and rows.shape[1] != self._matrix.shape[1]:
            self._failed(f"vectors of {rows.shape[1]} dimensions, not {self._matrix.shape[1]}")
            return False
        return True

    def _append(self, digests: list[str], rows: np.ndarray) -> None:
        if self._used + len(rows) > len(self._matrix) or self._matrix.shape[1] != rows.shape[1]:
            grown = np.zeros((max(2 * len(self._matrix), self._used + len(rows), 64),
                              rows.shape[1]), dtype=np.float32)  # fmt: skip
            if self._used:
                grown[: self._used] = self._matrix[: self._used]
            self._matrix = grown
        self._matrix[self._used : self._used + len(rows)] = rows
        for n, digest in enumerate(digests):
            self._rows[digest] = self._used + n
        self._used += len(rows)
        self._view = None

    async def _forget_orphans(self) -> None:
        """Vectors of texts no document holds any more: out of the store, and out of the
        matrix once they are a quarter of it."""
        live = self._digests((self._groups or {}).values())
        orphans = [d for d in self._rows if d not in live]
        if orphans:
            await self.store.drop_vectors(self.space, orphans)
            for digest in orphans:
                del self._rows[digest]
        if self._used > 64 and len(self._rows) < self._used * 3 // 4:
            digests = list(self._rows)
            rows = self._matrix[[self._rows[d] for d in digests]]
            self._matrix, self._rows, self._used = np.zeros((0, 0), dtype=np.float32), {}, 0
            self._append(digests, rows)

    def _failed(self, reason: str) -> None:
        self._quiet_until = self.clock() + RETRY_S
        if not self._failing:
            self._failing = True
            log.warning(
                "recall embeddings (%s): %s; recall ranks by words alone until they answer "
                "again (tried again every %g s)",
                self.space,
                reason,
                RETRY_S,
            )

    def _answered(self) -> None:
        if self._failing:
            self._failing = False
            log.info("recall embeddings (%s) answer again", self.space)

    # -- searching -------------------------------------------------------------------------

    async def nearest(self, query: SearchQuery) -> Nearness | None:
        """The documents closest to the query's message among those it may see, or None when
        the embeddings cannot help now (none yet, failing, no text); never raises."""
        if self._unfinished and self.clock() >= self._quiet_until:
            self._schedule()  # what a failure left undone, tried again
        if (
            not self._used
            or not query.text
            or not set(query.sources) & set(VECTOR_SOURCES)
            or self.clock() < self._quiet_until
        ):
            return None
        try:
            (vector,) = await self.embedder.embed([query.text], self.settings.timeout_s)
        except EmbeddingFailed as exc:
            self._failed(str(exc))
            return None
        except Exception:
            log.exception("recall embeddings: the question could not be embedded")
            return None
        self._answered()
        if len(vector) != self._matrix.shape[1]:
            self._failed(f"vectors of {len(vector)} dimensions, not {self._matrix.shape[1]}")
            return None
        return self.closest(vector, query)

    def closest(self, vector: np.ndarray, query: SearchQuery) -> Nearness:
        """The visible documents by cosine to `vector` (unit length), best first."""
        view = self._view or self._make_view()
        mask = view.rows >= 0
        if query.scopes is not None:
            mask &= self._among(view, "scope", query.scopes)
        mask &= self._among(view, "source", query.sources)
        if query.exclude_groups:
            mask &= ~self._among(view, "group", query.exclude_groups)
        similarities = self._matrix[: self._used] @ vector.astype(np.float32)
        cosines = np.full(len(view.docs), -np.inf, dtype=np.float32)
        cosines[mask] = similarities[view.rows[mask]]
        count = min(CANDIDATES, int(mask.sum()))
        if count == 0:
            return Nearness([], cosines, view.position)
        best = np.argpartition(-cosines, count - 1)[:count]
        best = best[np.argsort(-cosines[best])]
        top = [(view.docs[i], float(cosines[i])) for i in best]
        return Nearness(top, cosines, view.position)

    @staticmethod
    def _among(view: _View, field: str, values: Iterable[str]) -> np.ndarray:
        codes = [view.codes[field][v] for v in values if v in view.codes[field]]
        return np.isin(view.coded[field], codes)

    def _make_view(self) -> _View:
        entries = [e for group in (self._groups or {}).values() for e in group]
        docs = [doc for doc, _ in entries]
        rows = np.array([self._rows.get(digest, -1) for _, digest in entries], dtype=np.int64)
        codes: dict[str, dict[str, int]] = {"scope": {}, "source": {}, "group": {}}
        coded: dict[str, np.ndarray] = {}
        for field, values in (
            ("scope", [d.scope for d in docs]),
            ("source", [d.source for d in docs]),
            ("group", [d.group for d in docs]),
        ):
            table = codes[field]
            coded[field] = np.array([table.setdefault(v, len(table)) for v in values], np.int32)
        position: dict[tuple[str, str], int] = {(d.source, d.ref): n for n, d in enumerate(docs)}
        self._view = _View(docs, rows, codes, coded, position)
        return self._view
