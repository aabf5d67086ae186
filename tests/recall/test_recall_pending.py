"""A chat run's search documents wait a moment and are written with the next runs', in one
transaction (`bot/recall/pending.py`); a search that could find any of them writes them
first, so no search misses a run saved before it; close writes what is left."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.model import Message
from bot.kernel.sessions import SessionKey
from bot.recall.index import SearchIndex
from bot.recall.pending import PendingDocuments, _could_find
from bot.recall.visibility import scope_of
from bot.store.roles import Store
from bot.store.search_rows import SearchDocument, SearchQuery, SearchSource
from tests.waiting import eventually

ADA = SessionKey.dm("main", "telegram", "default", "111")
BOB = SessionKey.dm("main", "telegram", "default", "222")


def said(text: str) -> list[Message]:
    return [
        {"role": "user", "content": [{"type": "text", "text": text}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"Noted: {text}"}]},
    ]


async def chatter(store: Store) -> None:
    """Other documents, so the words searched for are rare enough to score."""
    await store.index_documents(
        [
            SearchDocument("memory", f"m:{n}", "m", "public", "note", f"chatter{n} pebble{n}")
            for n in range(6)
        ]
    )


async def indexed(store: Store) -> int:
    return (await store.search_counts()).get("sessions", 0)


async def texts(index: SearchIndex, words: str, key: SessionKey) -> list[str]:
    query = SearchQuery.of(words, scopes=(scope_of(key),))
    return [h.document.text for h in await index.search(query)]


async def test_runs_are_written_together_a_moment_later(store: Store, tmp_path: Path) -> None:
    index = SearchIndex(store, tmp_path / "workspace")
    index.pending.after = 0.2
    writes: list[int] = []
    write = index.pending._write

    async def counted(docs: Sequence[SearchDocument]) -> None:
        writes.append(len(docs))
        await write(docs)

    index.pending._write = counted
    for n, key in enumerate((ADA, BOB, ADA)):
        session = await store.session(str(key))
        await index.index_run(key, session.id, said(f"kayak number {n}"))
    assert await indexed(store) == 0 and len(index.pending) == 6  # none written yet
    await eventually(lambda: bool(writes), timeout=10)  # due on a timer: nothing to await
    assert writes == [6]  # three runs, one write
    assert await indexed(store) == 6 and len(index.pending) == 0
    await index.aclose()


async def test_a_search_that_could_find_a_waiting_run_writes_it_first(
    store: Store, tmp_path: Path
) -> None:
    await chatter(store)
    index = SearchIndex(store, tmp_path / "workspace")
    index.pending.after = 3600  # only a search (or close) writes them here
    ada = await store.session(str(ADA))
    await index.index_run(ADA, ada.id, said("the piano tuner comes Friday"))
    # Bob's chat cannot see Ada's DM, and Ada's own chat leaves itself out: nothing written.
    assert await texts(index, "piano tuner", BOB) == []
    left_out = SearchQuery.of("piano tuner", scopes=(scope_of(ADA),), exclude_groups=(ada.id,))
    assert await index.search(left_out) == []
    assert await indexed(store) == 0
    # A search that sees Ada's DM finds the run: it was written first.
    assert await texts(index, "piano tuner", ADA) == [
        "the piano tuner comes Friday",
        "Noted: the piano tuner comes Friday",
    ]
    assert await indexed(store) == 2 and len(index.pending) == 0
    await index.aclose()


async def test_close_writes_what_is_left(store: Store, tmp_path: Path) -> None:
    index = SearchIndex(store, tmp_path / "workspace")
    index.pending.after = 3600
    session = await store.session(str(ADA))
    await index.index_run(ADA, session.id, said("the tent has a torn zip"))
    assert await indexed(store) == 0
    await index.aclose()
    assert await indexed(store) == 2


async def test_a_failed_write_is_logged_and_the_next_runs_are_written(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    failing = [True]

    async def write(docs: Sequence[SearchDocument]) -> None:
        if failing.pop():
            raise OSError("disk full")
        await store.index_documents(docs)

    pending = PendingDocuments(write, after=3600)
    doc = SearchDocument("sessions", "s:1", "s", "public", "user", "a lantern for the tent")
    await pending.add([doc])
    with caplog.at_level(logging.ERROR, logger="bot.recall.pending"):
        await pending.flush()  # never raises
    assert "1 documents could not be indexed" in caplog.text
    failing.append(False)
    later = SearchDocument("sessions", "s:2", "s", "public", "user", "a new paddle")
    await pending.add([later])
    await pending.close()
    assert await indexed(store) == 1


async def test_many_waiting_documents_are_written_at_once(store: Store) -> None:
    pending = PendingDocuments(store.index_documents, after=3600, most=4)
    docs = [
        SearchDocument("sessions", f"s:{n}", "s", "public", "user", f"note {n}") for n in range(4)
    ]
    await pending.add(docs[:3])
    assert await indexed(store) == 0
    await pending.add(docs[3:])
    assert await indexed(store) == 4 and len(pending) == 0


SCOPES = ["public", "owner", "dm:1", "dm:2"]
GROUPS = ["s1", "s2", "s3"]
SOURCES: list[SearchSource] = ["memory", "sessions", "skills"]


def one_could_find(query: SearchQuery, doc: SearchDocument) -> bool:
    return (
        doc.source in query.sources
        and (query.scopes is None or doc.scope in query.scopes)
        and doc.group not in query.exclude_groups
    )


@settings(max_examples=300)
@given(
    docs=st.lists(
        st.tuples(st.sampled_from(SOURCES), st.sampled_from(SCOPES), st.sampled_from(GROUPS)),
        max_size=6,
    ),
    sources=st.lists(st.sampled_from(SOURCES), min_size=1, unique=True),
    scopes=st.none() | st.lists(st.sampled_from(SCOPES), unique=True),
    excluded=st.lists(st.sampled_from(GROUPS), unique=True),
)
def test_a_search_writes_the_waiting_runs_exactly_when_it_could_find_one(
    docs: list[tuple[SearchSource, str, str]],
    sources: list[SearchSource],
    scopes: list[str] | None,
    excluded: list[str],
) -> None:
    waiting = [
        SearchDocument(src, f"r{n}", grp, scope, "user", "x")
        for n, (src, scope, grp) in enumerate(docs)
    ]
    pending = PendingDocuments(store_nothing, after=3600)
    for doc in waiting:
        pending._where.setdefault((doc.source, doc.scope), set()).add(doc.group)
    query = SearchQuery(
        {"x": 1.0},
        sources=tuple(sources),
        scopes=None if scopes is None else tuple(scopes),
        exclude_groups=tuple(excluded),
    )
    assert _could_find(query, pending._where) == any(one_could_find(query, d) for d in waiting)


async def store_nothing(docs: Sequence[SearchDocument]) -> None:
    return None
