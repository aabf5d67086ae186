"""OpenAIClient, the real openai SDK against FakeOpenAI: streaming, tool calls in pieces,
images, usage and cost, reasoning kept out, retries and fail-fast; the router's fallbacks
across providers and a history that switches kinds mid-conversation."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents.model import Message, ModelError, ModelRequest
from agents.pricing import Price
from agents.providers.anthropic import AnthropicClient
from agents.providers.openai import OpenAIClient
from agents.providers.router import ModelRouter
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.blackhole import unaccepting_port
from tests.fakes.openai import FakeOpenAI

KEY = "sk-openai-test-secret"


class SleepLog:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def request(text: str = "hi", model: str = "gpt-test", **kw: Any) -> ModelRequest:
    messages: list[Message] = kw.pop(
        "messages", [{"role": "user", "content": [{"type": "text", "text": text}]}]
    )
    return ModelRequest(
        model=model, system=[{"type": "text", "text": "You are Perch."}], messages=messages, **kw
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY) as server:
        yield server


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[OpenAIClient]:
    c = OpenAIClient(
        KEY, fake.base_url, name="local", backoff_base=0.001, backoff_cap=0.01, max_attempts=3
    )
    yield c
    await c.aclose()


async def test_streamed_text_arrives_in_deltas_and_reasoning_never_does(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    fake.reasoning = "SECRET CHAIN OF THOUGHT"
    fake.queue(Reply.text("Hello there, friend", chunk=4))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    response = await client.complete(request(), on_text)
    assert response.content == [{"type": "text", "text": "Hello there, friend"}]
    assert "".join(deltas) == "Hello there, friend" and len(deltas) > 1
    assert "SECRET" not in repr(response) and not any("SECRET" in d for d in deltas)
    body = fake.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are Perch."}
    assert fake.headers[0]["Authorization"] == f"Bearer {KEY}"


async def test_several_tool_calls_with_arguments_in_pieces(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    fake.queue(
        Reply.tool_use(
            [("read_file", {"path": "a.txt"}, "call_1"), ("echo", {"text": "é ü"}, "call_2")],
            text="Let me look.",
        )
    )
    tools = [{"name": "read_file", "description": "reads", "input_schema": {"type": "object"}}]
    response = await client.complete(request(tools=tools))
    assert response.stop_reason == "tool_use"
    assert response.content == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "call_2", "name": "echo", "input": {"text": "é ü"}},
    ]
    assert fake.requests[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "reads",
                "parameters": {"type": "object"},
            },
        }
    ]


async def test_images_and_tool_history_are_translated(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    history: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "read it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hidden", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"p": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "gone",
                    "is_error": True,
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                },
                {"type": "text", "text": "and this?"},
            ],
        },
    ]
    await client.complete(request(messages=history))
    sent = fake.requests[0]["messages"][1:]
    assert sent[0] == {"role": "user", "content": "read it"}
    assert sent[1]["role"] == "assistant" and sent[1]["content"] is None
    assert sent[1]["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"p": 1}'},
        }
    ]
    assert sent[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: gone"}
    assert sent[3]["role"] == "user"
    assert sent[3]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        {"type": "text", "text": "and this?"},
    ]


async def test_a_tools_images_follow_the_tool_messages_in_a_user_message(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    pixel = {"type": "base64", "media_type": "image/png", "data": "iVBO"}
    history: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "draw"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_a", "name": "web__shot", "input": {}},
                {"type": "tool_use", "id": "call_b", "name": "web__echo", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_a",
                    "content": [
                        {"type": "text", "text": "a screenshot"},
                        {"type": "image", "source": pixel},  # type: ignore[typeddict-item]
                    ],
                },
                {"type": "tool_result", "tool_use_id": "call_b", "content": "echo"},
            ],
        },
    ]
    await client.complete(request(messages=history))
    sent = fake.requests[0]["messages"][2:]
    # Tool messages come right after the calls (text only); the image after both of them.
    assert [m["role"] for m in sent] == ["assistant", "tool", "tool", "user"]
    assert sent[1] == {"role": "tool", "tool_call_id": "call_a", "content": "a screenshot\n[image]"}
    assert sent[3]["content"] == [
        {"type": "text", "text": "[images from tool call call_a]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
    ]


def _pixel(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


async def test_tool_result_images_follow_all_tool_messages_in_one_user_message(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    calls = [{"type": "tool_use", "id": f"t{n}", "name": "shot", "input": {}} for n in (1, 2, 3)]
    history: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "screenshots"}]},
        {"role": "assistant", "content": calls},  # type: ignore[typeddict-item]
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "first"}, _pixel("AAAA")],
                },
                {"type": "tool_result", "tool_use_id": "t2", "content": "plain"},
                {"type": "tool_result", "tool_use_id": "t3", "content": [_pixel("BBBB")]},
                {"type": "text", "text": "compare them"},
            ],
        },
    ]
    await client.complete(request(messages=history))
    sent = fake.requests[0]["messages"][3:]
    assert [m["role"] for m in sent] == ["tool", "tool", "tool", "user"]
    assert sent[0]["content"] == "first\n[image]"
    assert sent[1]["content"] == "plain"
    assert sent[2]["content"] == "[image]"
    assert sent[3]["content"] == [
        {"type": "text", "text": "[images from tool call t1]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "[images from tool call t3]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}},
        {"type": "text", "text": "compare them"},
    ]
    # A model that refused tool images once gets notes from then on (one request, no retry).
    fake.queue(Reply.http_error(400, "invalid_request_error", "no image input"), Reply.text("ok"))
    answer = await client.complete(request(messages=history))
    assert answer.content == [{"type": "text", "text": "ok"}]
    fake.queue(Reply.text("again"))
    await client.complete(request(messages=history))
    assert len(fake.requests) == 4
    assert "image_url" not in str(fake.requests[3]["messages"])
    assert fake.requests[3]["messages"][-1] == {"role": "user", "content": "compare them"}


async def test_a_400_for_another_reason_keeps_tool_images_for_the_model(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    history: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "shot"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "s", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [_pixel("AAAA")]}],
        },
    ]
    # The request is refused with and without the images (too long, say): the error is the
    # turn's, and the model is not marked as taking no images.
    too_long = Reply.http_error(400, "invalid_request_error", "context too long")
    fake.queue(too_long, too_long)
    with pytest.raises(ModelError) as caught:
        await client.complete(request(messages=history))
    assert caught.value.kind == "bad_request"
    assert len(fake.requests) == 2 and "image_url" not in str(fake.requests[1]["messages"])
    fake.queue(Reply.text("ok"))
    await client.complete(request(messages=history))
    assert "image_url" in str(fake.requests[2]["messages"])


async def test_usage_from_the_last_chunk_is_priced(fake: FakeOpenAI) -> None:
    client = OpenAIClient(KEY, fake.base_url, prices={"gpt-test": Price(2.0, 8.0)})
    fake.queue(Reply.text("ok", usage={"input_tokens": 1000, "cache_read_input_tokens": 500}))
    response = await client.complete(request())
    await client.aclose()
    usage = response.usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (1000, 500)
    assert usage.output_tokens > 0
    expected = (1000 * 2.0 + 500 * 2.0 * 0.1 + usage.output_tokens * 8.0) / 1_000_000
    assert usage.cost_usd == pytest.approx(expected)


async def test_a_model_without_a_price_costs_nothing(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    response = await client.complete(request())
    assert response.usage.input_tokens > 0 and response.usage.cost_usd == 0.0


async def test_429_honours_retry_after_and_500_is_retried(fake: FakeOpenAI) -> None:
    sleeps = SleepLog()
    client = OpenAIClient(KEY, fake.base_url, sleep=sleeps, backoff_base=0.5, backoff_cap=0.5)
    fake.queue(
        Reply.http_error(429, "rate_limit_error", "slow down", retry_after=7),
        Reply.http_error(500, "api_error", "boom"),
        Reply.text("fine"),
    )
    response = await client.complete(request())
    await client.aclose()
    assert response.content == [{"type": "text", "text": "fine"}]
    assert sleeps.delays[0] == 7.0 and len(sleeps.delays) == 2
    assert len(fake.requests) == 3


async def test_a_mid_stream_error_is_retried_before_text_but_not_after(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    fake.queue(Reply.stream_error("server_error"), Reply.text("second try"))
    assert (await client.complete(request())).content[0] == {"type": "text", "text": "second try"}

    fake.queue(Reply.stream_error("server_error", partial_text="Half"), Reply.text("never"))
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    with pytest.raises(ModelError, match="broke after the reply had started") as caught:
        await client.complete(request(), on_text)
    assert caught.value.kind == "broken_stream" and not caught.value.may_fall_back
    assert seen == ["Half"] and len(fake.requests) == 3


async def test_a_rejected_key_is_not_retried_and_names_the_setting(fake: FakeOpenAI) -> None:
    client = OpenAIClient("wrong", fake.base_url, name="local")
    with pytest.raises(ModelError) as caught:
        await client.complete(request())
    await client.aclose()
    assert "rejected the API key (401)" in str(caught.value)
    assert "providers.local.api_key" in str(caught.value)
    assert caught.value.kind == "auth" and len(fake.requests) == 1


def closed_port() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


async def test_a_host_that_never_accepts_a_connection_counts_as_unreachable() -> None:
    with unaccepting_port() as port, pytest.raises(ModelError) as caught:
        base_url = f"http://127.0.0.1:{port}/v1"
        client = OpenAIClient(
            KEY, base_url, name="local", sleep=SleepLog(), max_attempts=3, connect_timeout=0.3
        )
        try:
            await client.complete(request())
        finally:
            await client.aclose()
    assert caught.value.kind == "unreachable" and caught.value.may_fall_back
    assert str(caught.value).startswith(f"Could not reach the model API at {base_url} (Connect")


async def test_an_unreachable_server_fails_fast_and_says_so() -> None:
    sleeps = SleepLog()
    sock = closed_port()
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    client = OpenAIClient(KEY, base_url, name="local", sleep=sleeps, max_attempts=20)
    with sock, pytest.raises(ModelError) as caught:
        await client.complete(request())
    await client.aclose()
    assert sum(sleeps.delays) <= 30.0 and len(sleeps.delays) < 19  # not the 20-attempt budget
    assert caught.value.kind == "unreachable" and caught.value.may_fall_back
    message = str(caught.value)
    assert message.startswith(f"Could not reach the model API at {base_url}")
    assert "local/gpt-test can't be reached" in message
    assert "providers.local.base_url" in message


async def test_overload_keeps_the_long_budget(fake: FakeOpenAI) -> None:
    sleeps = SleepLog()
    client = OpenAIClient(KEY, fake.base_url, sleep=sleeps, max_attempts=12)
    fake.default = lambda body: Reply.http_error(529, "overloaded_error")
    with pytest.raises(ModelError, match="overloaded; gave up after 12 attempts"):
        await client.complete(request())
    await client.aclose()
    assert len(sleeps.delays) == 11 and sum(sleeps.delays) > 30.0


async def test_list_models(fake: FakeOpenAI, client: OpenAIClient) -> None:
    assert await client.list_models() == ["qwen3:8b", "gpt-test"]


# ---- the router: fallbacks across providers, a history that changes kinds -------------------


async def test_overloaded_anthropic_falls_back_to_an_openai_provider(fake: FakeOpenAI) -> None:
    async with FakeAnthropic() as claude:
        claude.default = lambda body: Reply.http_error(529, "overloaded_error")
        anthropic = AnthropicClient("k", claude.base_url, max_attempts=2, sleep=SleepLog())
        local = OpenAIClient(KEY, fake.base_url, name="local")
        router = ModelRouter({"anthropic": anthropic, "local": local}, fallbacks=["local/gpt-test"])
        history: list[Message] = [
            {"role": "user", "content": [{"type": "text", "text": "list files"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_9", "content": "a.txt"},
                    {"type": "text", "text": "and now?"},
                ],
            },
        ]
        response = await router.complete(request(model="claude-sonnet-5-5", messages=history))
        await router.aclose()
    assert response.model == "local/gpt-test"
    assert response.content == [{"type": "text", "text": "echo: and now?"}]
    assert len(claude.requests) == 2
    roles = [m["role"] for m in fake.requests[0]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    # The next call of the same turn goes straight to the fallback.
    assert router.chain("local/gpt-test") == ["local/gpt-test"]


def test_model_names_route_by_provider() -> None:
    clients: dict[str, Any] = {"anthropic": object(), "openrouter": object()}
    router = ModelRouter(clients, fallbacks=["openrouter/anthropic/claude-x", "claude-haiku"])
    assert router.split("claude-sonnet-5-5") == ("anthropic", "claude-sonnet-5-5")
    assert router.split("openrouter/anthropic/claude-x") == ("openrouter", "anthropic/claude-x")
    assert router.split("unknown/model") == ("anthropic", "unknown/model")
    assert router.chain("claude-sonnet-5-5") == [
        "anthropic/claude-sonnet-5-5",
        "openrouter/anthropic/claude-x",
        "anthropic/claude-haiku",
    ]
    assert router.display("anthropic/claude-haiku") == "claude-haiku"


async def test_tool_ids_are_made_safe_for_every_kind(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    fake.queue(Reply.tool_use([("ls", {}, "functions.ls:0"), ("ls", {}, "")]))
    response = await client.complete(request())
    ids = [b["id"] for b in response.content if b["type"] == "tool_use"]
    assert ids[0] == "functions_ls_0"
    assert ids[1].startswith("call_perch_") and ids[1] != ids[0]


async def test_the_key_never_reaches_a_log(
    fake: FakeOpenAI, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(Reply.http_error(500, "api_error", "boom"), Reply.text("ok"))
    with caplog.at_level(logging.DEBUG):
        await client.complete(request())
    assert "attempt 1/3: 500" in caplog.text
    assert KEY not in caplog.text and KEY not in repr(client)
