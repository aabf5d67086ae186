"""The `Search` role's vectors (recall's embeddings), on every backend: kept by space and
text digest, replaced, forgotten by digest or by space; a source's documents read back.
Part of the store contract: the `backend` fixture gives SQLite and PostgreSQL."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import pytest

from bot.store.roles import Store
from bot.store.search_rows import SearchDocument
from tests.store_backends import Backend


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    s = await backend.open()
    try:
        yield s
    finally:
        await s.close()


def vector(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


async def test_vectors_are_kept_by_space_and_digest_and_replaced(store: Store) -> None:
    assert await store.load_vectors("emb/small/256") == {}
    await store.save_vectors("emb/small/256", {"d1": vector(1, 0), "d2": vector(0, 1)})
    await store.save_vectors("emb/large/native", {"d1": vector(0.5, 0.5, 0.5)})
    await store.save_vectors("emb/small/256", {"d2": vector(0.6, 0.8)})  # replaced
    await store.save_vectors("emb/small/256", {})
    assert await store.load_vectors("emb/small/256") == {"d1": vector(1, 0), "d2": vector(0.6, 0.8)}
    assert await store.load_vectors("emb/large/native") == {"d1": vector(0.5, 0.5, 0.5)}


async def test_vectors_are_forgotten_by_digest_and_by_space(store: Store) -> None:
    await store.save_vectors("a", {"d1": vector(1), "d2": vector(2), "d3": vector(3)})
    await store.save_vectors("b", {"d1": vector(4)})
    await store.drop_vectors("a", ["d1", "d3", "unknown"])
    await store.drop_vectors("a", [])
    assert await store.load_vectors("a") == {"d2": vector(2)}
    assert await store.load_vectors("b") == {"d1": vector(4)}  # another space's d1 stays
    await store.clear_vectors(keep="b")
    assert await store.load_vectors("a") == {} and await store.load_vectors("b") != {}
    await store.clear_vectors()
    assert await store.load_vectors("b") == {}


async def test_a_sources_documents_are_read_back_whole(store: Store) -> None:
    notes = [
        SearchDocument("memory", f"MEMORY.md#{n}", "MEMORY.md", "owner", "MEMORY.md", t, 5.0)
        for n, t in enumerate(["I live in Lisbon", "Ada is my sister"], start=1)
    ]
    skill = SearchDocument("skills", "sailing", "skills", "public", "sailing", "sailing: boats")
    await store.replace_group("memory", "MEMORY.md", notes, "s1")
    await store.index_documents([skill])
    assert await store.search_documents("memory") == notes
    assert await store.search_documents("skills") == [skill]
    assert await store.search_documents("sessions") == []
