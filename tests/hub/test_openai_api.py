"""The OpenAI-compatible API as a user points a client at it: the official `openai` Python
client with `base_url=http://127.0.0.1:<port>/v1`, the whole daemon (the dashboard off, so
the web server runs for the API alone), the fake model behind it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from bot.web.openai_api import token_tag
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.harness import make_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(180)

TOKEN = "api-token-0123456789abcdef"


def signed(body: dict[str, Any]) -> Reply:
    system = json.dumps(body.get("system", ""))
    who = "Otto" if "I am Otto" in system else "Wren"
    return Reply.text(f"{who} on {body['model']}", usage={"input_tokens": 50, "output_tokens": 7})


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        server.default = signed
        yield server


@pytest.fixture
async def daemon(tmp_path: Path, model: FakeAnthropic) -> AsyncIterator[Daemon]:
    work = tmp_path / "workspace-work"
    work.mkdir()
    (work / "SOUL.md").write_text("# Soul\n\nI am Otto.\n")
    config = make_config(
        tmp_path,
        model.base_url,
        {
            "agents": [{"id": "work", "model": "claude-haiku-4-5"}],
            "web": {"enabled": False, "listen": "127.0.0.1:0"},
            "api": {"enabled": True, "tokens": [TOKEN]},
        },
    )
    running = Daemon(config)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


def client_of(daemon: Daemon, token: str = TOKEN) -> openai.AsyncOpenAI:
    assert daemon.parts is not None and daemon.parts.web is not None
    port = daemon.parts.web.address.port
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=token, max_retries=0, timeout=60
    )


async def test_models_are_the_agents_and_answers_come_whole_and_streamed(
    daemon: Daemon, model: FakeAnthropic
) -> None:
    client = client_of(daemon)
    listed = await client.models.list()
    assert [m.id for m in listed.data] == ["main", "work"]

    whole = await client.chat.completions.create(
        model="work", messages=[{"role": "user", "content": "hello"}]
    )
    assert whole.choices[0].message.content == "Otto on claude-haiku-4-5"
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage is not None and whole.usage.completion_tokens == 7

    stream = await client.chat.completions.create(
        model="main",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "my favourite colour is teal"},
            {"role": "assistant", "content": "Noted: teal."},
            {"role": "user", "content": "what is it?"},
        ],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    usage = None
    async for part in stream:
        if part.choices and part.choices[0].delta.content:
            pieces.append(part.choices[0].delta.content)
        if part.usage is not None:
            usage = part.usage
    assert "".join(pieces) == "Wren on claude-sonnet-5-5"
    assert usage is not None and usage.prompt_tokens >= 50
    # Stateless: the request's earlier messages were the conversation the model saw.
    sent = json.dumps(model.requests[-1]["messages"])
    assert "my favourite colour is teal" in sent and "Noted: teal." in sent
    assert "Answer briefly." in sent


async def test_a_wrong_token_is_401_and_an_unknown_model_404_in_openai_shape(
    daemon: Daemon, model: FakeAnthropic
) -> None:
    with pytest.raises(openai.AuthenticationError) as wrong:
        await client_of(daemon, "not-the-token-at-all-xyz").models.list()
    assert wrong.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        await client_of(daemon, "not-the-token-at-all-xyz").chat.completions.create(
            model="main", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.NotFoundError) as unknown:
        await client_of(daemon).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert unknown.value.code == "model_not_found"
    assert model.requests == []  # nothing ran
    for _ in range(3):  # five wrong tokens in a minute: the address waits, even with a good one
        with pytest.raises(openai.AuthenticationError):
            await client_of(daemon, "still-not-the-token-xyz").models.list()
    with pytest.raises(openai.RateLimitError):
        await client_of(daemon).models.list()


async def test_a_session_per_user_keeps_history_and_a_cancelled_request_stops_its_run(
    daemon: Daemon, model: FakeAnthropic
) -> None:
    client = client_of(daemon)
    first = await client.chat.completions.create(
        model="main", messages=[{"role": "user", "content": "remember plum"}], user="ann"
    )
    assert first.choices[0].message.content
    model.queue(Reply.hang())
    asking = asyncio.create_task(
        client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "what fruit?"}], user="ann"
        )
    )
    await model.wait_requests(2, timeout=60)
    assert "remember plum" in json.dumps(model.requests[-1]["messages"])  # the kept session
    key = SessionKey.dm("main", "api", token_tag(TOKEN), "ann")
    assert daemon.gateway is not None and daemon.gateway.is_busy(key)
    asking.cancel()
    await eventually(lambda: not daemon.gateway.is_busy(key), timeout=30)


async def test_the_agents_tools_run_in_perch_and_the_caller_sees_only_the_answer(
    daemon: Daemon, model: FakeAnthropic
) -> None:
    model.queue(
        Reply.tool_use([("write_file", {"path": "note.txt", "content": "from the API"})]),
        Reply.text("Saved it."),
    )
    answer = await client_of(daemon).chat.completions.create(
        model="main", messages=[{"role": "user", "content": "save a note"}]
    )
    message = answer.choices[0].message
    assert message.content == "Saved it." and not message.tool_calls
    assert (daemon.config.workspace / "note.txt").read_text() == "from the API"
    assert len(model.requests) == 2  # the tool's result went back to the model, in Perch


async def test_a_stream_shows_the_text_while_the_agent_writes_it(
    daemon: Daemon, model: FakeAnthropic
) -> None:
    model.queue(Reply.stall("The first part of the answer is here.\nAnd more", chunk=6))
    stream = await client_of(daemon).chat.completions.create(
        model="main", messages=[{"role": "user", "content": "go"}], stream=True, user="bo"
    )
    seen = ""
    async for part in stream:  # the model has not finished: these come from the running turn
        if part.choices and part.choices[0].delta.content:
            seen += part.choices[0].delta.content
        if "answer is here" in seen:
            break
    assert seen.startswith("The first part of the answer is here")
    await stream.close()  # the caller goes away mid-answer: the run stops
    key = SessionKey.dm("main", "api", token_tag(TOKEN), "bo")
    await eventually(lambda: not daemon.gateway.is_busy(key), timeout=30)  # type: ignore[union-attr]
