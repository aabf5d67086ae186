"""Recall per turn, end to end: the daemon's own graph (`bot.build`), the real Anthropic SDK
against the fake Messages API, chats on an in-memory Telegram. What the model is sent is
read off the wire: a fact noted in one DM reaches the same person's next DM without a tool
call, never a group or another person's DM; the owner's notes reach only the owner's DMs;
an unrelated message recalls nothing; the recalled block sits after the cached prefix and
is not stored."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.kernel.lanes import Pending, Turn
from bot.kernel.sessions import SessionKey
from channels.base import ChatRef, Inbound
from tests.agents.test_prompt_cache import marked_prefixes, tokens_through_mark
from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.prompt_cache import PromptCache

OWNER = "4242"
OWNERS = {"channels.telegram": {"enabled": False, "allow_from": [OWNER]}}


def dm(peer: str) -> ChatRef:
    return ChatRef("telegram", "default", "dm", peer)


def group(chat_id: str) -> ChatRef:
    return ChatRef("telegram", "default", "group", chat_id)


async def say(replay: ChatReplay, chat: ChatRef, text: str, sender: str = "") -> None:
    """One turn in `chat` (a DM's sender is its peer), run and saved as the daemon does."""
    assert replay.parts is not None
    inbound = Inbound(
        chat=chat,
        sender_id=sender or chat.chat_id,
        text=text,
        message_id=uuid.uuid4().hex,
        received_at=replay.now,
    )
    key = SessionKey.for_chat("main", chat)
    await replay.parts.gateway.runner.run(key, Turn([Pending(inbound, None)]), chat)
    replay.advance(60)


async def new_session(replay: ChatReplay, chat: ChatRef) -> None:
    """/new: the chat's next message starts a fresh session."""
    assert replay.store is not None
    await replay.store.archive_session(str(SessionKey.for_chat("main", chat)))


def recalled(body: dict[str, Any]) -> str:
    """The recall block of a request's new user message ("" when there is none)."""
    blocks = body["messages"][-1]["content"]
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    return next((t for t in texts if t.startswith("<recalled_context>")), "")


def tool_calls(body: dict[str, Any]) -> list[str]:
    return [
        b["name"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(cache=PromptCache()) as server:
        yield server


async def test_a_fact_from_one_dm_reaches_the_same_persons_next_dm_and_no_one_else(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.default = lambda body: Reply.text("Noted.")
    person, other = dm("777"), dm("888")
    async with ChatReplay(fake, tmp_path, OWNERS) as chat:
        await say(chat, person, "My sister Zelda moved to Lisbon last spring.")
        await new_session(chat, person)
        asked = len(fake.requests)
        await say(chat, person, "Which city does my sister live in now?")
        await say(chat, group("-100"), "Which city does my sister live in now?", sender="777")
        await say(chat, other, "Which city does my sister live in now?")
        await say(chat, person, "Any good pasta recipe for tonight?")
        stored = await chat_messages(chat, person)
    same, in_group, elsewhere, unrelated = fake.requests[asked:]
    block = recalled(same)
    assert "Zelda moved to Lisbon" in block and "this chat, earlier, they said" in block
    assert tool_calls(same) == []  # found for the model, not by it
    assert recalled(in_group) == recalled(elsewhere) == ""
    assert recalled(unrelated) == ""  # off-topic: nothing, not the best of a bad lot
    assert not any("<recalled_context>" in text for text in stored)  # not saved
    assert "Which city does my sister live in now?" in stored


async def chat_messages(replay: ChatReplay, chat: ChatRef) -> list[str]:
    assert replay.store is not None
    session = await replay.store.session(str(SessionKey.for_chat("main", chat)))
    return [
        b.get("text", "")
        for m in await replay.store.messages(session.id)
        for b in m["content"]
        if b.get("type") == "text"
    ]


async def test_the_owners_notes_reach_only_the_owners_dms(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        asked = last_user_text(body)
        if "Remember" in asked and body["messages"][-1]["content"][0].get("type") == "text":
            return Reply.tool_use([("memory_append", {"text": "The boat's mooring is at pier 7."})])
        return Reply.text("OK.")

    fake.default = answer
    owner = dm(OWNER)
    async with ChatReplay(fake, tmp_path, OWNERS) as chat:
        await say(chat, owner, "Remember: the mooring of the boat is at pier 7.")
        await new_session(chat, owner)
        asked = len(fake.requests)
        await say(chat, owner, "Where is the boat moored?")
        await say(chat, dm("777"), "Where is the boat moored?")
        await say(chat, group("-100"), "Where is the boat moored?", sender=OWNER)
    mine, stranger, in_group = fake.requests[asked:]
    assert "pier 7" in recalled(mine) and "memory/" in recalled(mine)
    assert tool_calls(mine) == []
    assert "pier 7" not in recalled(stranger) and "pier 7" not in recalled(in_group)


async def test_recall_writes_nothing_of_the_stable_prefix_and_costs_one_turn_later(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.default = lambda body: Reply.text("Sure.")
    person = dm("777")
    async with ChatReplay(fake, tmp_path, OWNERS) as chat:
        await say(chat, person, "The plumber Quentin comes on Thursday morning.")
        await new_session(chat, person)
        first = len(fake.requests)
        for text in ("hello there", "When does the plumber come?", "thanks, good night"):
            await say(chat, person, text)
    hello, asked, bye = fake.requests[first:]
    assert recalled(hello) == "" and "Quentin" in recalled(asked) and recalled(bye) == ""
    prefixes = [marked_prefixes(raw) for raw in fake.raw[first:]]
    for later in prefixes[1:]:
        assert later[:2] == prefixes[0][:2]  # the tools, persona and skills: the same bytes
    assert prefixes[1][2] == prefixes[0][-1]  # recall sits after where the last request ended
    assert fake.cache is not None
    uses = fake.cache.requests[first:]
    stable = tokens_through_mark(hello, 1)
    assert uses[1].read >= stable and uses[2].read >= stable  # never written again
    turn = tokens_through_mark(asked, 3) - tokens_through_mark(asked, 2)
    assert uses[2].read == uses[1].read  # read up to where the recall turn began ...
    assert 0 < uses[2].write <= turn  # ... and that turn written once more, nothing else


async def test_memory_search_is_ranked_dated_and_sees_what_the_chat_may(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["content"][0].get("type") == "tool_result":
            return Reply.text("done")
        return Reply.tool_use([("memory_search", {"query": "passport renewal"})])

    async with ChatReplay(fake, tmp_path, OWNERS) as chat:
        memory = chat.workspace / "memory"
        memory.mkdir(exist_ok=True)
        (memory / "2026-03-02.md").write_text(
            "# 2026-03-02\n\n- 08:30 Passport renewal form is in the blue folder\n"
            + "".join(f"- 09:{n:02d} unrelated chore {n} pebble{n}\n" for n in range(8))
        )
        fake.default = lambda body: Reply.text("ok")
        await say(chat, dm("777"), "My passport renewal appointment is on 3 June.")
        await new_session(chat, dm("777"))
        fake.default = answer
        asked = len(fake.requests)
        await say(chat, dm(OWNER), "find it")
        await say(chat, dm("777"), "find it")
        await say(chat, group("-100"), "find it", sender="777")
    results = [
        body["messages"][-1]["content"][0]["content"]
        for body in fake.requests[asked:]
        if body["messages"][-1]["content"][0].get("type") == "tool_result"
    ]
    owner, person, in_group = results
    assert owner.startswith("1. [memory/2026-03-02.md, 2026-03-02 08:30] Passport renewal form")
    assert "appointment" not in owner  # another person's DM
    assert person.startswith("1. [this chat, earlier, they said, ") and "3 June" in person
    assert "blue folder" not in person  # the owner's notes
    assert in_group.startswith("Nothing in memory matches")
