"""Compaction: the rules as pure functions, and a long conversation compacting itself
end to end (memory flush, summary, and the summary carried into the next turn)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.compaction import CompactionPolicy, render_transcript, split_point
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import running_daemon
from tests.model_backends import KINDS, OpenAIView


def msg(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def test_due_by_message_count_or_context_share() -> None:
    policy = CompactionPolicy(max_messages=50, context_ratio=0.75, window_tokens=200_000)
    assert not policy.due(50, 149_000)
    assert policy.due(51, 0)
    assert policy.due(10, 150_001)


def test_split_point_keeps_a_tail_that_starts_with_a_plain_user_message() -> None:
    tool_use = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "r"}
    messages = [
        msg("user", text("a")),
        msg("assistant", text("b")),
        msg("user", text("c")),
        msg("assistant", tool_use),
        msg("user", result),
        msg("assistant", text("d")),
    ]
    # The last 4 would start at a tool_use answer; move back to the plain user message.
    assert split_point(messages, 4) == 2
    assert split_point(messages, 6) == 0
    assert split_point(messages[:2], 4) == 0


def test_transcript_shortens_tool_traffic() -> None:
    messages = [
        msg("user", text("read it")),
        msg(
            "assistant",
            {"type": "tool_use", "id": "t", "name": "read_file", "input": {"path": "a.txt"}},
        ),
        msg("user", {"type": "tool_result", "tool_use_id": "t", "content": "x" * 5000}),
    ]
    transcript = render_transcript(messages)
    assert "User: read it" in transcript
    assert '[Assistant called read_file({"path": "a.txt"})]' in transcript
    assert len(transcript) < 600


@pytest.fixture(params=KINDS)
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Both provider kinds: the Anthropic fake, or the Chat Completions one seen in the
    Messages shape (a session's history survives either)."""
    if request.param == "openai":
        async with FakeOpenAI() as server:
            yield OpenAIView(server)
    else:
        async with FakeAnthropic() as server:
            yield server


def scripted(body: dict[str, Any]) -> Reply:
    asked = last_user_text(body)
    if asked.startswith("[Automatic compaction]"):  # asked inside the conversation itself
        return Reply.text("- The user's cat is called Miso.\n- They like green tea.")
    if "Automatic memory flush" in asked:
        if body["messages"][-1]["content"][0].get("type") == "tool_result":
            return Reply.text("NO_REPLY")
        return Reply.tool_use([("memory_append", {"text": "Cat: Miso"})])
    return Reply.text("echo: " + asked)


async def test_a_long_conversation_compacts_itself_and_keeps_its_context(
    tmp_path: Path, fake: Any
) -> None:
    fake.default = scripted
    chan = MemoryChannel("console", account="local")
    overrides = {"agent.compaction": {"max_messages": 8, "keep_last": 4}}
    async with running_daemon(tmp_path, fake, {"console": chan}, overrides) as daemon:
        for i, line in enumerate(["my cat is Miso", "I like green tea", "a", "b", "c"], 1):
            await chan.say(line, chat_id="owner")
            await chan.wait_sent(i)
            await asyncio.wait_for(daemon.gateway.wait_idle(), 5)  # type: ignore[union-attr]
        assert daemon.upkeep is not None
        await asyncio.wait_for(daemon.upkeep.wait_idle(), 10)

        store: Store = daemon.store  # type: ignore[assignment]
        key = str(SessionKey.dm("main", "console", "local", "owner"))
        session = await store.session(key)
        assert session.compactions == 1
        assert "Miso" in session.summary
        kept = await store.messages(session.id)
        assert [m["content"][-1]["text"] for m in kept] == ["b", "echo: b", "c", "echo: c"]
        memory = list((tmp_path / "workspace" / "memory").glob("*.md"))
        assert memory and "Cat: Miso" in memory[0].read_text()

        await chan.say("what is my cat called?", chat_id="owner")
        await chan.wait_sent(6)
    last = fake.requests[-1]["messages"]
    assert "[Summary of our earlier conversation]" in last[0]["content"][0]["text"]
    assert "Miso" in last[0]["content"][0]["text"]
    assert last[-1]["content"][-1]["text"].endswith("what is my cat called?")  # after recall
    assert len(last) == 7  # summary pair + 4 kept + the question
    reply = chan.texts()[-1]  # the flush's NO_REPLY was silent; the note was recalled
    assert reply.startswith("echo: ") and reply.endswith("what is my cat called?")


async def test_compact_command_summarises_on_demand(tmp_path: Path, fake: Any) -> None:
    fake.default = scripted
    chan = MemoryChannel("console", account="local")
    async with running_daemon(tmp_path, fake, {"console": chan}) as daemon:
        for i, line in enumerate(["one", "two", "three"], 1):
            await chan.say(line, chat_id="owner")
            await chan.wait_sent(i)
            await asyncio.wait_for(daemon.gateway.wait_idle(), 5)  # type: ignore[union-attr]
        await chan.say("/compact", chat_id="owner")
        await chan.wait_sent(4)
        assert chan.texts()[-1] == "Compacted: 2 older messages are now a summary."
        await chan.say("/compact", chat_id="owner")
        await chan.wait_sent(5)
        assert chan.texts()[-1] == "Nothing to compact yet."
