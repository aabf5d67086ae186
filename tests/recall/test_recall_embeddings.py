"""Recall with embeddings, end to end: the daemon's graph (`bot.build`), the real Anthropic
SDK against the fake Messages API for the model, the real `openai` SDK against the fake
OpenAI server's `/v1/embeddings` for the vectors. A note that shares no word with a question
is recalled into the owner's next DM with embeddings, not without, and never into another
person's DM or a group; an unrelated message recalls nothing; when the embeddings fail,
recall ranks by words, the log says so once, and no turn fails."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.openai import FakeOpenAI
from tests.recall.test_recall import (
    OWNER,
    OWNERS,
    dm,
    group,
    new_session,
    recalled,
    say,
    tool_calls,
)

KEY = "sk-embeddings-secret"


def embeddings(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        **OWNERS,
        "providers.emb": {"kind": "openai", "base_url": base_url, "api_key": KEY},
        "agent.recall.embeddings": {"provider": "emb", "dimensions": 256, **extra},
    }


def remembering(body: dict[str, Any]) -> Reply:
    """The model notes what it is told to remember (memory_append), else says OK."""
    asked = last_user_text(body)
    if asked.startswith("Remember") and body["messages"][-1]["content"][0].get("type") == "text":
        return Reply.tool_use([("memory_append", {"text": asked.removeprefix("Remember: ")})])
    return Reply.text("OK.")


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        server.default = remembering
        yield server


@pytest.fixture
async def emb() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY) as server:
        yield server


QUESTION = "Which city is my home?"  # no word in common with the note


@pytest.mark.parametrize("with_embeddings", [True, False])
async def test_a_note_sharing_no_word_with_the_question_is_recalled_by_its_meaning(
    fake: FakeAnthropic, emb: FakeOpenAI, tmp_path: Path, with_embeddings: bool
) -> None:
    owner = dm(OWNER)
    settings = embeddings(emb.base_url) if with_embeddings else OWNERS
    async with ChatReplay(fake, tmp_path, settings) as chat:
        assert chat.parts is not None
        await say(chat, owner, "Remember: I live in Lisbon since 2019.")
        await chat.parts.index.settle()  # the note embedded in the background after the run
        await new_session(chat, owner)
        asked = len(fake.requests)
        await say(chat, owner, QUESTION)
        await say(chat, dm("777"), QUESTION)
        await say(chat, group("-100"), QUESTION, sender=OWNER)
        await say(chat, owner, "Any good pasta recipe for tonight?")
    mine, stranger, in_group, unrelated = fake.requests[asked:]
    assert tool_calls(mine) == []
    if with_embeddings:
        assert "I live in Lisbon since 2019." in recalled(mine) and "memory/" in recalled(mine)
        assert "I live in Lisbon since 2019." in emb.embeddings.texts  # embedded once ...
        assert QUESTION in emb.embeddings.texts  # ... and the question at its turn
    else:
        assert recalled(mine) == "" and emb.embeddings.requests == []
    assert recalled(stranger) == recalled(in_group) == ""  # the owner's note: their DMs only
    assert recalled(unrelated) == ""  # off-topic: nothing, with vectors as without


@pytest.mark.parametrize("fault", ["down", "http500", "garbage", "short", "wrong_size", "hang"])
async def test_failing_embeddings_leave_recall_to_the_words_and_are_logged_once(
    fake: FakeAnthropic, tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner = dm(OWNER)
    emb = FakeOpenAI(api_key=KEY)
    await emb.__aenter__()
    try:
        async with ChatReplay(fake, tmp_path, embeddings(emb.base_url, timeout_s=0.5)) as chat:
            assert chat.parts is not None and chat.parts.index.vectors is not None
            await say(chat, owner, "Remember: the kayak needs a new paddle.")
            await chat.parts.index.settle()
            assert chat.parts.index.vectors.count() == 2  # the note and the bundled skill
            if fault == "down":  # the provider is gone: its address answers nothing
                await emb.__aexit__(None, None, None)
            else:
                emb.embeddings.fault = fault  # type: ignore[assignment]
            await new_session(chat, owner)
            asked = len(fake.requests)
            with caplog.at_level(logging.INFO, logger="bot.recall"):
                await say(chat, owner, "Where is the kayak paddle?")
                await say(chat, owner, "Is the kayak paddle new?")
    finally:
        await emb.__aexit__(None, None, None)
    first, second = fake.requests[asked:]
    assert "kayak needs a new paddle" in recalled(first)  # by its words
    assert "kayak needs a new paddle" in recalled(second)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # once, not every turn
    line = warnings[0].getMessage()
    assert "recall ranks by words alone" in line and KEY not in line
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
