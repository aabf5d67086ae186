"""Images returned by MCP tools reach the model: a real daemon, the real MCP test server over
stdio (tests/mcp_servers/), and the fake Anthropic or Chat Completions server as the model.

Anthropic gets the image inside the tool_result; a Chat Completions model gets the text in the
tool message and the image in a user message after it (or notes, if it refuses images). Over
the cap, another type, or audio: a one-line note. Once the run ends, the stored history keeps
a note instead of the base64."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import running_daemon
from tests.mcp_servers.running import stdio_entry
from tests.mcp_servers.tools import PIXEL
from tests.model_backends import OpenAIView
from tests.waiting import eventually

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
SETTINGS = {**OPEN_DMS, "mcp.servers": {"demo": stdio_entry()}}
PIXEL_B64 = base64.b64encode(PIXEL).decode("ascii")
PIXEL_URL = f"data:image/png;base64,{PIXEL_B64}"
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def local() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


async def up(daemon: Daemon) -> None:
    await eventually(lambda: daemon.status()["mcp"]["demo"]["state"] == "up", 30)


async def saved(daemon: Daemon) -> list[Any]:
    store: Store = daemon.store  # type: ignore[assignment]
    session = await store.session(str(SessionKey.dm("main", "telegram", "bot", "u1")))
    return list(await store.messages(session.id))


def tool_result(body: dict[str, Any]) -> dict[str, Any]:
    [block] = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    return block


async def test_an_mcp_image_reaches_claude_inside_the_tool_result_and_leaves_history(
    tmp_path: Path, claude: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, claude, {"telegram": chan}, SETTINGS) as daemon:
        await up(daemon)
        claude.queue(Reply.tool_use([("demo__picture", {})]), Reply.text("A red pixel."))
        await chan.say("what does the picture show?")
        assert await chan.wait_sent(1, timeout=30) == ["A red pixel."]
        content = tool_result(claude.requests[1])["content"]
        caption = f"a red pixel\n[image image/png, {len(PIXEL)} bytes: attached below]"
        assert content[0] == {"type": "text", "text": caption}
        assert content[1]["type"] == "image"
        assert content[1]["source"] == {
            "type": "base64",
            "media_type": "image/png",
            "data": PIXEL_B64,
        }
        stored = await saved(daemon)
        claude.queue(Reply.text("Still red."))
        await chan.say("and again?")
        await chan.wait_sent(2, timeout=30)
    # The run is over: history keeps a note, not the picture, and the next turn sends the note.
    assert PIXEL_B64 not in str(stored)
    stored_result = next(b for m in stored for b in m["content"] if b["type"] == "tool_result")
    assert stored_result["content"][0]["text"].startswith("a red pixel\n[image image/png")
    note = stored_result["content"][1]["text"]
    assert note.startswith(f"[image image/png, {len(PIXEL)} bytes: shown to the model")
    assert PIXEL_B64 not in str(claude.requests[2]["messages"])
    assert note in str(claude.requests[2]["messages"])


async def test_oversized_or_other_images_and_audio_become_notes(
    tmp_path: Path, claude: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, claude, {"telegram": chan}, SETTINGS) as daemon:
        await up(daemon)
        claude.queue(Reply.tool_use([("demo__oversized", {})]), Reply.text("Too big."))
        await chan.say("show me the big one")
        await chan.wait_sent(1, timeout=30)
    content = tool_result(claude.requests[1])["content"]
    assert isinstance(content, str)
    big = len(PIXEL) + 5_000_001
    assert content.splitlines() == [
        f"[image image/png, {big} bytes: not shown (over 5000000 bytes)]",
        f"[image image/tiff, {len(PIXEL)} bytes: not shown (only PNG, JPEG, GIF and WebP are)]",
        "[audio audio/wav, 12 bytes: not shown as text]",
    ]


async def test_a_chat_completions_model_gets_the_image_in_a_user_message_after_the_tool(
    tmp_path: Path, local: FakeOpenAI
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, OpenAIView(local), {"telegram": chan}, SETTINGS) as daemon:
        await up(daemon)
        local.queue(Reply.tool_use([("demo__picture", {})]), Reply.text("A red pixel."))
        await chan.say("what does the picture show?")
        assert await chan.wait_sent(1, timeout=30) == ["A red pixel."]
    messages = local.requests[1]["messages"]
    tool, follow = messages[-2:]
    call_id = messages[-3]["tool_calls"][0]["id"]
    assert tool == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": f"a red pixel\n[image image/png, {len(PIXEL)} bytes: attached below]\n[image]",
    }
    assert follow == {
        "role": "user",
        "content": [
            {"type": "text", "text": f"[images from tool call {call_id}]"},
            {"type": "image_url", "image_url": {"url": PIXEL_URL}},
        ],
    }


async def test_a_model_that_refuses_images_still_answers_the_turn(
    tmp_path: Path, local: FakeOpenAI
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, OpenAIView(local), {"telegram": chan}, SETTINGS) as daemon:
        await up(daemon)
        local.queue(
            Reply.tool_use([("demo__picture", {})]),
            Reply.http_error(400, "invalid_request_error", "image input is not supported"),
            Reply.text("I cannot see images, but the tool said: a red pixel."),
        )
        await chan.say("what does the picture show?")
        [answer] = await chan.wait_sent(1, timeout=30)
    assert answer == "I cannot see images, but the tool said: a red pixel."
    refused, retried = local.requests[1:3]
    assert PIXEL_URL in str(refused["messages"])
    assert "image_url" not in str(retried["messages"])
    assert retried["messages"][-1] == {
        "role": "tool",
        "tool_call_id": retried["messages"][-2]["tool_calls"][0]["id"],
        "content": f"a red pixel\n[image image/png, {len(PIXEL)} bytes: attached below]\n"
        "[image: not shown, this model takes no images]",
    }
