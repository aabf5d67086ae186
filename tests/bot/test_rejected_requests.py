"""No poisoned chat: a request the model API refuses for good (400, 413, 422) leaves the
history the next turn sends (kept in the store, marked), the user is told in plain words what
was refused, and the next message is answered. The same when a tool's result is what the API
refuses. The fake model refuses, as the real API refuses an image it cannot read, every
request that carries the marked content, however often it is sent."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import Message, ModelError
from bot.hub.rejected import rejected_reply, rejection_mark
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import running_daemon
from tests.model_backends import KINDS, OpenAIView
from tests.turn_text import said

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
WAIT = 30  # the first turn imports an SDK; CI machines are busy
MARK = "UNREADABLE-IMAGE"
API_SAYS = "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum"


def refusing(body: dict[str, Any]) -> Reply:
    """The API's answer: 400 for any request that still carries the marked content."""
    if MARK in json.dumps(body["messages"]):
        return Reply.http_error(400, "invalid_request_error", API_SAYS)
    return Reply.text("echo: " + said(last_user_text(body)))


@pytest.fixture(params=KINDS)
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "openai":
        async with FakeOpenAI() as server:
            view = OpenAIView(server)
            view.default = refusing
            yield view
    else:
        async with FakeAnthropic() as server:
            server.default = refusing
            yield server


def conversation(body: dict[str, Any]) -> list[str]:
    """The texts of a request's messages, in order, without their time stamps."""
    texts = []
    for message in body["messages"]:
        for block in message["content"]:
            if block.get("type") == "text" and said(block["text"]):
                texts.append(said(block["text"]))
    return texts


def stored_rejections(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "data" / "perch.db") as db:
        rows = db.execute(
            "SELECT role, rejected FROM messages WHERE rejected != '' ORDER BY id"
        ).fetchall()
    return [(str(role), str(reason)) for role, reason in rows]


async def test_a_refused_message_leaves_the_history_and_the_next_one_is_answered(
    tmp_path: Path, fake: Any
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("hello")
        await chan.wait_sent(1, timeout=WAIT)
        await chan.say(f"look at this {MARK}")
        await chan.wait_sent(2, timeout=WAIT)
        await chan.say("and now?")
        await chan.wait_sent(3, timeout=WAIT)
        await chan.say("still there?")
        texts = await chan.wait_sent(4, timeout=WAIT)
    assert texts[0] == "echo: hello"
    notice = texts[1]
    assert notice.startswith("The model API refused your message: it is too large (400)")
    assert "image exceeds 5 MB maximum" in notice and "next message will be answered" in notice
    assert texts[2:] == ["echo: and now?", "echo: still there?"]
    # The next request carries the chat before the refused message, not the message.
    assert conversation(fake.requests[-1]) == [
        "hello",
        "echo: hello",
        "and now?",
        "echo: and now?",
        "still there?",
    ]
    assert stored_rejections(tmp_path) == [("user", f"400: {API_SAYS}")]


async def test_a_refused_tool_result_leaves_the_history_with_its_whole_run(
    tmp_path: Path,
) -> None:
    async with FakeAnthropic() as fake:
        fake.default = refusing
        chan = MemoryChannel("telegram")
        async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
            (tmp_path / "workspace" / "scan.txt").write_text(f"a page with {MARK}\n")
            fake.queue(Reply.tool_use([("read_file", {"path": "scan.txt"})]))
            await chan.say("read scan.txt")
            await chan.wait_sent(1, timeout=WAIT)
            await chan.say("what now?")
            texts = await chan.wait_sent(2, timeout=WAIT)
    assert texts[0].startswith("The model API refused a tool's result in this turn")
    assert texts[1] == "echo: what now?"
    history = json.dumps(fake.requests[-1]["messages"])
    assert MARK not in history and "read_file" not in history and "scan.txt" not in history
    # The run (its message, the call and the refused result) is kept, marked.
    assert [role for role, _ in stored_rejections(tmp_path)] == ["user", "assistant", "user"]


async def test_a_passing_failure_stays_in_the_history(tmp_path: Path) -> None:
    """A 5xx (or 429, or a timeout) is not a refusal: the message is kept and sent again."""
    async with FakeAnthropic() as fake:
        fake.queue(Reply.http_error(500, "api_error", "Internal server error"))
        chan = MemoryChannel("telegram")
        overrides = {**OPEN_DMS, "providers.anthropic.max_attempts": 1}  # no retry: one 500
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides):
            await chan.say("first")
            await chan.wait_sent(1, timeout=WAIT)
            await chan.say("second")
            await chan.wait_sent(2, timeout=WAIT)
    assert stored_rejections(tmp_path) == []
    assert "first" in json.dumps(fake.requests[-1]["messages"])


@pytest.mark.parametrize(
    ("status", "detail", "words"),
    [
        (413, "request_too_large", "refused your message: it is too large (413)"),
        (400, "image/bmp is not a supported media type", "could not take an image in it (400)"),
        (400, "The PDF specified was not valid.", "could not take a document in it (400)"),
        (422, "", "refused your message (422). I have left it out"),
    ],
)
def test_the_notice_says_what_was_refused(status: int, detail: str, words: str) -> None:
    error = ModelError("refused", status=status, detail=detail)
    assert error.rejected_for_good
    assert words in rejected_reply(error, [])


@pytest.mark.parametrize("status", [408, 409, 429, 500, 529, None])
def test_only_a_refusal_for_good_counts(status: int | None) -> None:
    assert not ModelError("x", status=status, retryable=True).rejected_for_good


@given(
    status=st.sampled_from([400, 413, 422]),
    detail=st.text(max_size=5000),
    tool=st.booleans(),
)
def test_the_notice_is_bounded_and_names_the_status_whatever_the_api_said(
    status: int, detail: str, tool: bool
) -> None:
    messages: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    if tool:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
            }
        )
    reply = rejected_reply(ModelError("refused", status=status, detail=detail), messages)
    assert f"({status})" in reply and "next message will be answered" in reply
    assert len(reply) <= 600 and "\n" not in reply  # the API's text, one line and cut
    assert ("a tool's result" in reply) == tool
    assert rejection_mark(ModelError("refused", status=status, detail=detail)).startswith(
        f"{status}: "
    )
