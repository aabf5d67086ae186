"""The store's search role: recall's index of memory notes, conversations and skills.

One of the roles of `bot/store/roles.py` (`Store` includes it), kept in a file of its own:
the documents indexed and searched (full-text: SQLite FTS5, PostgreSQL's text search) and
the vectors of the optional embeddings (`bot/recall/vectors.py`), by space.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from bot.store.search_rows import SearchDocument, SearchHit, SearchQuery, SearchSource


class Search(Protocol):
    """The search index over memory notes, past conversations and skills (`bot/recall/`):
    documents in, ranked hits out, each scored 0..1 the same way on every backend
    (`bot/store/search_rows.py`). Derived data: `perch memory rebuild` makes it again from
    the workspace and the store, and `perch store migrate` does not copy it."""

    async def index_documents(self, documents: Sequence[SearchDocument]) -> None:
        """Add documents in one transaction; one of the same (source, ref) is replaced."""

    async def replace_group(
        self, source: SearchSource, group: str, documents: Sequence[SearchDocument], stamp: str
    ) -> None:
        """In one transaction: forget the documents of (`source`, `group`), add `documents`
        (all of that group) and keep `stamp` as what the group was made from."""

    async def remove_group(self, source: SearchSource, group: str) -> int:
        """Forget the group's documents and its stamp; how many documents went."""

    async def search_stamps(self, source: SearchSource) -> dict[str, str]:
        """Every group of `source` with a stamp, and the stamp (a group may hold none)."""

    async def search(self, query: SearchQuery) -> list[SearchHit]:
        """The documents `query` asks for, best first (see `SearchQuery`)."""

    async def clear_search(self, source: SearchSource | None = None) -> None:
        """Forget every document and stamp of `source` (None: of all), before a rebuild."""

    async def search_counts(self) -> dict[str, int]:
        """How many documents each source holds."""

    async def search_documents(self, source: SearchSource) -> list[SearchDocument]:
        """Every document of `source` (the vectors of recall's embeddings are made for them)."""

    async def save_vectors(self, space: str, vectors: Mapping[str, bytes]) -> None:
        """Keep vectors of `space` (a provider, model and size) by the digest of the text they
        were made from (float32, little-endian); one of the same digest is replaced."""

    async def load_vectors(self, space: str) -> dict[str, bytes]:
        """Every vector of `space`, by digest."""

    async def drop_vectors(self, space: str, digests: Collection[str]) -> None:
        """Forget these vectors of `space` (no document holds their text any more)."""

    async def clear_vectors(self, keep: str | None = None) -> None:
        """Forget every vector of a space other than `keep` (None: every vector)."""
