"""The search index kept current (`bot/recall/index.py`) on a real SQLite store and a real
workspace: memory files by their stamps, skills by the catalog, runs as they are saved, the
rebuild; and what memory notes are made of (`bot/recall/documents.py`)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from agents.model import Message
from bot.kernel.sessions import SessionKey
from bot.recall.documents import memory_notes
from bot.recall.index import SearchIndex
from bot.store.roles import Store
from bot.store.search_rows import SearchQuery


def note_file(workspace: Path, name: str, text: str) -> Path:
    path = workspace / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def found(index: SearchIndex, text: str) -> list[str]:
    hits = await index.search(SearchQuery.of(text, scopes=None))
    return [h.document.text for h in hits]


FILLER = "".join(f"- filler note {n} about pebble{n}\n" for n in range(6))


async def test_memory_files_are_indexed_as_they_change(store: Store, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    note_file(
        workspace,
        "2026-05-01.md",
        "# 2026-05-01\n\n- 14:05 The kayak needs a new paddle\n" + FILLER,
    )
    index = SearchIndex(store, workspace, rescan_s=3600)
    assert await found(index, "kayak paddle") == ["The kayak needs a new paddle"]
    note_file(workspace, "2026-05-02.md", "- 09:00 The tent has a torn zip\n")  # new: at once
    assert await found(index, "tent zip") == ["The tent has a torn zip"]
    with (workspace / "memory" / "2026-05-02.md").open("a") as f:  # the newest: each turn
        f.write("- 10:00 Buy a lantern for the tent\n")
    assert "Buy a lantern for the tent" in await found(index, "lantern")
    for day in (3, 4, 5):  # newer days: the first file is no longer among the newest
        note_file(workspace, f"2026-05-0{day}.md", f"- 09:00 day {day}\n")
    assert await found(index, "tent zip")  # looked at them all (memory/ changed)
    old = workspace / "memory" / "2026-05-01.md"
    with old.open("a") as f:  # an older file appended to outside the tools ...
        f.write("- 15:00 The canoe is in the garage\n")
    os.utime(old, (1_700_000_000, 1_700_000_000))
    assert await found(index, "canoe garage") == []  # ... is looked at on the next full look
    assert await found(SearchIndex(store, workspace, rescan_s=0), "canoe garage") == [
        "The canoe is in the garage"
    ]
    old.unlink()
    assert await found(index, "kayak") == []  # a file gone: at once (memory/ changed)
    assert "memory/2026-05-01.md" not in await store.search_stamps("memory")


async def test_a_linked_memory_file_is_not_indexed(store: Store, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    secret = tmp_path / "secret.md"
    secret.write_text("- the vault code is 4321\n")
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "link.md").symlink_to(secret)
    os.link(secret, workspace / "memory" / "hard.md")
    note_file(workspace, "plain.md", FILLER)
    index = SearchIndex(store, workspace)
    assert await found(index, "vault code") == []


async def test_runs_are_indexed_and_a_rebuild_finds_them_again(
    store: Store, tmp_path: Path
) -> None:
    key = SessionKey.dm("main", "telegram", "default", "777")
    index = SearchIndex(store, tmp_path / "workspace")
    session = await store.session(str(key))
    run: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "[Mon 2026-05-04 10:00 UTC]"},
                                     {"type": "text", "text": "The piano tuner comes Friday"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "secret plan", "signature": "s"},
                                          {"type": "text", "text": "<think>hidden</think>Noted: the tuner, Friday."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "tool output"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "NO_REPLY"}]},
    ]  # fmt: skip
    others: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": f"chatter{n} pebble{n}"}]}
        for n in range(4)
    ]
    await store.save_run(session.id, str(key), [*run, *others], usage=_usage())
    await index.index_run(key, session.id, [*run, *others])
    texts = await found(index, "piano tuner")
    assert texts == ["The piano tuner comes Friday", "Noted: the tuner, Friday."]
    for word in ("secret plan", "hidden", "tool output", "2026"):
        assert await found(index, word) == []
    counts = await index.rebuild()
    assert counts["sessions"] == 6  # the same documents, not twice
    assert await found(index, "piano tuner") == texts


def _usage():  # type: ignore[no-untyped-def]
    from agents.model import Usage

    return Usage()


def test_memory_notes_are_bullets_and_paragraphs_dated_by_their_day() -> None:
    text = (
        "# 2026-05-01\n\n- 14:05 Dentist moved\n  to Thursday\n* no time here\n\n"
        "## Family\nAda is my sister.\nShe lives in Lisbon.\n\n1. first step\n<!-- a comment -->\n"
    )
    notes = memory_notes("memory/2026-05-01.md", text, 99.0)
    assert [n.text for n in notes] == [
        "Dentist moved to Thursday",
        "no time here",
        "(Family) Ada is my sister. She lives in Lisbon.",
        "(Family) first step",
    ]
    assert notes[0].at == datetime(2026, 5, 1, 14, 5).astimezone().timestamp()
    assert [n.at for n in notes[1:]] == [99.0, 99.0, 99.0]
    assert {n.scope for n in notes} == {"owner"} and notes[0].ref == "memory/2026-05-01.md#1"
    long = memory_notes("MEMORY.md", "word " * 1000, 1.0)
    assert len(long) == 4 and all(len(n.text) <= 1500 for n in long)
