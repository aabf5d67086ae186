"""Recall's vectors on a real SQLite store, a real workspace and the real `openai` SDK against
the fake `/v1/embeddings`: an edited note gets a new vector (the old one is never used and
is forgotten), another model or size makes its vectors anew, `perch memory rebuild`
embeds everything again and `perch memory search` ranks by meaning too; the hybrid score
(`bot/recall/hybrid.py`) as a table; `agent.recall.embeddings` refused with one clear line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config.errors import ConfigError
from bot.config.schema import Config
from bot.operator.ops_memory import op_memory_rebuild, op_memory_search
from bot.operator.reply import OpContext
from bot.recall.hybrid import blend, closeness
from bot.recall.index import SearchIndex
from bot.recall.vectors import text_digest
from bot.store.roles import Store
from bot.store.search_rows import SearchDocument, SearchHit, SearchQuery
from tests.fakes.openai import FakeOpenAI
from tests.harness import make_config

KEY = "sk-embeddings-secret"


@pytest.fixture
async def emb() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY) as server:
        yield server


def config_for(tmp_path: Path, emb: FakeOpenAI, **extra: Any) -> Config:
    return make_config(
        tmp_path,
        "http://127.0.0.1:9",
        {
            "providers.emb": {"kind": "openai", "base_url": emb.base_url, "api_key": KEY},
            "agent.recall.embeddings": {"provider": "emb", **extra},
        },
    )


def write_notes(config: Config, *notes: str) -> None:
    folder = config.workspace / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    filler = "".join(f"- filler note {n} about pebble{n}\n" for n in range(6))
    (folder / "notes.md").write_text("".join(f"- {n}\n" for n in notes) + filler)


def note(text: str, n: int = 1) -> SearchDocument:
    return SearchDocument("memory", f"memory/notes.md#{n}", "memory/notes.md", "owner",
                          "memory/notes.md", text)  # fmt: skip


async def test_an_edited_note_gets_a_new_vector_and_the_old_one_goes(
    tmp_path: Path, emb: FakeOpenAI, store: Store
) -> None:
    config = config_for(tmp_path, emb, dimensions=64)
    write_notes(config, "Ada lives in Lisbon")
    index = SearchIndex.from_config(config, store, rescan_s=0)
    try:
        await index.refresh()
        await index.settle()
        assert index.vectors is not None
        space = index.vectors.space
        old = text_digest(note("Ada lives in Lisbon"))
        assert old in await store.load_vectors(space)
        write_notes(config, "Ada lives in Porto")
        asked = len(emb.embeddings.texts)
        await index.refresh()
        await index.settle()
        assert emb.embeddings.texts[asked:] == ["Ada lives in Porto"]  # only what changed
        stored = await store.load_vectors(space)
        assert text_digest(note("Ada lives in Porto")) in stored and old not in stored
        assert len(stored) == 7 == index.vectors.count()
    finally:
        await index.aclose()


async def test_another_size_makes_new_vectors_and_a_rebuild_embeds_all_again(
    tmp_path: Path, emb: FakeOpenAI, store: Store
) -> None:
    small = config_for(tmp_path, emb, dimensions=64)
    write_notes(small, "Ada lives in Lisbon")
    first = SearchIndex.from_config(small, store)
    await first.refresh()
    await first.settle()
    await first.aclose()
    assert first.vectors is not None and len(await store.load_vectors(first.vectors.space)) == 7
    larger = SearchIndex.from_config(config_for(tmp_path, emb, dimensions=128), store)
    try:
        asked = len(emb.embeddings.requests)
        await larger.refresh()
        await larger.settle()
        assert larger.vectors is not None and larger.vectors.count() == 7
        assert await store.load_vectors(first.vectors.space) == {}  # never used again
        assert {r["dimensions"] for r in emb.embeddings.requests[asked:]} == {128}
    finally:
        await larger.aclose()
    asked = len(emb.embeddings.texts)
    config = config_for(tmp_path, emb, dimensions=128)
    reply = await op_memory_rebuild(OpContext(config, store), {})
    assert reply.code == 0 and "7 memory notes, 0 messages, 1 skills, 8 embedded" in reply.out
    documents = [*await store.search_documents("memory"), *await store.search_documents("skills")]
    assert sorted(emb.embeddings.texts[asked:]) == sorted(d.text for d in documents)


async def test_perch_memory_search_finds_by_meaning_when_embeddings_are_configured(
    tmp_path: Path, emb: FakeOpenAI, store: Store
) -> None:
    config = config_for(tmp_path, emb, dimensions=64)
    write_notes(config, "Ada lives in Lisbon")
    context = OpContext(config, store)
    index = SearchIndex.from_config(config, store)
    await index.refresh()
    await index.settle()  # what the daemon does in the background after start
    await index.aclose()
    reply = await op_memory_search(context, {"query": "Which city is her home?"})
    assert reply.code == 0 and reply.out.splitlines()[1].strip() == "Ada lives in Lisbon"
    plain = make_config(tmp_path, "http://127.0.0.1:9")
    nothing = await op_memory_search(OpContext(plain, store), {"query": "Which city is home?"})
    assert nothing.code == 1  # by words alone: no word in common


def hit(doc: SearchDocument, score: float) -> SearchHit:
    return SearchHit(doc, score, ("word",))


@pytest.mark.parametrize(
    ("text", "cosine", "expected"),
    [
        (0.8, None, 0.8),  # no vector (a conversation, or not made yet): the words alone
        (0.8, 0.6, 0.4 + 0.5),  # (1 - weight) * text + weight * closeness, capped at 1
        (0.8, 0.4, 0.4 + 0.25),  # halfway between floor and ceiling
        (0.0, 0.6, 0.5),  # meaning alone, as much as the words alone could
        (0.6, 0.1, 0.3),  # unrelated by meaning: the words' half only, under 0.5
        (0.0, 0.2, None),  # at the floor: nothing
    ],
)
def test_a_hybrid_score_is_a_weighted_share_of_words_and_meaning(
    text: float, cosine: float | None, expected: float | None
) -> None:
    doc = note("Ada lives in Lisbon")
    query = SearchQuery.of("question", min_score=0.0)
    texts = [hit(doc, text)] if text else []
    near = [(doc, cosine)] if cosine is not None else []
    hits = blend(query, texts, near, lambda d: None, weight=0.5, floor=0.2, ceiling=0.6)
    assert [h.score for h in hits] == ([pytest.approx(expected)] if expected else [])


def test_closeness_maps_cosines_between_floor_and_ceiling_to_0_1() -> None:
    assert [closeness(c, 0.2, 0.6) for c in (-1.0, 0.2, 0.3, 0.6, 0.99)] == [
        0.0, 0.0, pytest.approx(0.25), 1.0, 1.0,
    ]  # fmt: skip


def test_blend_keeps_min_score_limit_and_order_and_asks_cosines_of_text_hits() -> None:
    a, b, c = note("a", 1), note("b", 2), note("c", 3)
    query = SearchQuery.of("q", min_score=0.5, limit=2)
    cosines = {b.ref: 0.6}
    hits = blend(
        query,
        [hit(a, 1.0), hit(b, 0.9)],
        [(c, 0.6)],
        lambda d: cosines.get(d.ref),
        weight=0.5,
        floor=0.2,
        ceiling=0.6,
    )
    assert [(h.document.ref, round(h.score, 2)) for h in hits] == [(a.ref, 1.0), (b.ref, 0.95)]
    wider = blend(
        SearchQuery.of("q", min_score=0.5, limit=5),
        [hit(a, 1.0), hit(b, 0.9)],
        [(c, 0.6)],
        lambda d: cosines.get(d.ref),
        weight=0.5,
        floor=0.2,
        ceiling=0.6,
    )
    assert wider[-1].document == c and wider[-1].matched == ()  # found by meaning alone


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"provider": "nope"}, r"agent\.recall\.embeddings\.provider: no provider 'nope'"),
        ({"provider": "anthropic"}, "embeddings need a provider of kind: openai"),
    ],
)
def test_an_embeddings_provider_that_cannot_serve_is_a_config_error(
    tmp_path: Path, store: Store, settings: dict[str, Any], problem: str
) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9", {"agent.recall.embeddings": settings})
    with pytest.raises(ConfigError, match=problem):
        SearchIndex.from_config(config, store)


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"provider": "emb", "weight": 1.5}, "weight"),
        ({"provider": "emb", "floor": 0.7, "ceiling": 0.6}, "floor .* must be below ceiling"),
        ({"provider": "emb", "dimensions": 0}, "dimensions"),
        ({"model": "x"}, "provider"),
    ],
)
def test_embeddings_settings_are_checked_when_the_config_is_read(
    tmp_path: Path, settings: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        make_config(tmp_path, "http://127.0.0.1:9", {"agent.recall.embeddings": settings})
