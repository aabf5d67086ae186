"""Two agents' search indexes on one real store (each through its `AgentSearch`): the same
memory file names, skills and operator searches never show one agent what the other holds,
and each still finds its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.model import Usage, text_block
from bot.fleet.search_scope import AgentSearch
from bot.recall.index import SearchIndex
from bot.recall.visibility import OWNER, PUBLIC
from bot.store.roles import Store
from bot.store.search_rows import SearchQuery
from tests.store_backends import Backend


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    opened = await backend.open()
    try:
        yield opened
    finally:
        await opened.close()


FILLER = "".join(f"- filler note {n} about pebble{n}\n\n" for n in range(6))


def workspace(tmp_path: Path, name: str, note: str) -> Path:
    folder = tmp_path / name
    (folder / "memory").mkdir(parents=True)
    (folder / "MEMORY.md").write_text(f"- {note}\n\n{FILLER}")
    (folder / "memory" / "2026-05-01.md").write_text(f"- 09:00 {note} (dated)\n")
    return folder


async def texts(index: SearchIndex, words: str, scopes: tuple[str, ...] | None) -> list[str]:
    return sorted(h.document.text for h in await index.search(SearchQuery.of(words, scopes=scopes)))


async def test_two_agents_on_one_store_never_find_each_others_notes(
    store: Store, tmp_path: Path
) -> None:
    main = SearchIndex(
        AgentSearch(store, "main", main=True, alone=False),
        workspace(tmp_path, "workspace", "The kayak code is 7431"),
        rescan_s=0,
    )
    work = SearchIndex(
        AgentSearch(store, "work", main=False, alone=False),
        workspace(tmp_path, "workspace-work", "The kayak budget is 2286"),
        rescan_s=0,
    )
    for _ in range(2):  # each refresh keeps the other's groups (nothing is seen as stale)
        await main.refresh()
        await work.refresh()
    for scopes in ((OWNER, PUBLIC), None):  # the owner's DM, and the operator's every scope
        assert await texts(main, "kayak code budget", scopes) == [
            "The kayak code is 7431",
            "The kayak code is 7431 (dated)",
        ]
        assert await texts(work, "kayak code budget", scopes) == [
            "The kayak budget is 2286",
            "The kayak budget is 2286 (dated)",
        ]
    hit = (await work.search(SearchQuery.of("budget", scopes=(OWNER,))))[0].document
    assert (hit.group, hit.scope) == ("MEMORY.md", OWNER)  # names given back as stored
    assert set(await work.store.search_stamps("memory")) == {"MEMORY.md", "memory/2026-05-01.md"}
    await work.store.clear_search()  # another agent's clear leaves the main agent's notes
    assert await texts(main, "kayak", None) == [
        "The kayak code is 7431",
        "The kayak code is 7431 (dated)",
    ]


async def test_a_rebuild_indexes_only_the_agents_own_conversations(
    store: Store, tmp_path: Path
) -> None:
    for key, said in (
        ("agent:work:cron:j1", "The kayak vault opens with 5150"),
        ("agent:main:cron:j2", "The kayak shed opens with 8080"),
    ):
        row = await store.session(key)
        await store.save_run(
            row.id, key, [{"role": "assistant", "content": [text_block(said)]}], usage=Usage()
        )
    main = SearchIndex(
        AgentSearch(store, "main", main=True, alone=False),
        workspace(tmp_path, "workspace", "A note about pebbles"),
        rescan_s=0,
    )
    await main.rebuild()
    found = await texts(main, "kayak opens", None)
    assert any("8080" in text for text in found)
    assert not any("5150" in text for text in found)  # work's cron run: never main's
