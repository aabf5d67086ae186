"""AnthropicClient, the real SDK against FakeAnthropic: streaming, parsing, retries, fallback."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import ModelError, ModelRequest, ModelResponse, Usage
from agents.pricing import Price, context_window, cost_usd, price_for
from agents.providers.anthropic import AnthropicClient
from agents.providers.retry import backoff_delay, parse_retry_after
from agents.providers.router import ModelRouter
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.blackhole import unaccepting_port

KEY = "sk-ant-test-secret-123"
ROOT = Path(__file__).resolve().parents[2]


class SleepLog:
    """An injected sleep: records each wait the retry policy chose, waits no real time."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def request(text: str = "hi", model: str = "claude-sonnet-test", **kw: Any) -> ModelRequest:
    return ModelRequest(
        model=model,
        system=[{"type": "text", "text": "You are Perch."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        **kw,
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., Any]]:
    clients: list[AnthropicClient] = []

    def build(base_url: str, **kw: Any) -> Any:
        kw.setdefault("backoff_base", 0.001)
        kw.setdefault("backoff_cap", 0.01)
        fallbacks = kw.pop("fallback_models", None)
        client = AnthropicClient(kw.pop("api_key", KEY), base_url, **kw)
        clients.append(client)
        if fallbacks is not None:  # fallbacks are the router's job
            return ModelRouter({"anthropic": client}, fallbacks=fallbacks)
        return client

    yield build
    for client in clients:
        await client.aclose()


def closed_port_socket() -> socket.socket:
    """A socket bound on 127.0.0.1 but not listening: connecting to it is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


async def stream_text(
    client: AnthropicClient, req: ModelRequest
) -> tuple[ModelResponse, list[str]]:
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    return await client.complete(req, on_text), deltas


# ---- streaming and parsing -----------------------------------------------------------------


async def test_text_deltas_reach_on_text_in_order(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(Reply.text("Hello there, world", chunk=4))
    response, deltas = await stream_text(make_client(fake.base_url), request())
    assert deltas == ["Hell", "o th", "ere,", " wor", "ld"]
    assert response.content == [{"type": "text", "text": "Hello there, world"}]
    assert response.stop_reason == "end_turn"


async def test_request_carries_model_system_messages_tools_and_temperature(
    fake: FakeAnthropic, make_client: Any
) -> None:
    tools = [{"name": "read_file", "description": "Read", "input_schema": {"type": "object"}}]
    client = make_client(fake.base_url)
    await client.complete(request("first", tools=tools, temperature=0.3, max_tokens=99))
    await client.complete(request("second"))
    first, second = fake.requests
    assert first["model"] == "claude-sonnet-test"
    assert first["system"] == [{"type": "text", "text": "You are Perch."}]
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": "first"}]}]
    assert first["tools"] == tools
    assert first["temperature"] == 0.3
    assert first["max_tokens"] == 99
    assert first["stream"] is True
    assert "tools" not in second and "temperature" not in second
    assert KEY in (fake.headers[0].get("x-api-key", "") + fake.headers[0].get("Authorization", ""))


async def test_tool_use_blocks_are_parsed_with_their_input(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(
        Reply.tool_use(
            [("read_file", {"path": "notes/a.md"}, "toolu_given"), ("list_dir", {"path": "."})],
            text="Let me look.",
        )
    )
    response = await make_client(fake.base_url).complete(request())
    text, first, second = response.content
    assert text == {"type": "text", "text": "Let me look."}
    assert first == {
        "type": "tool_use",
        "id": "toolu_given",
        "name": "read_file",
        "input": {"path": "notes/a.md"},
    }
    assert second["name"] == "list_dir" and second["input"] == {"path": "."}
    assert second["id"].startswith("toolu_")
    assert response.stop_reason == "tool_use"


async def test_empty_text_blocks_are_dropped(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(Reply.tool_use([("list_dir", {})]), Reply.text(""))
    client = make_client(fake.base_url)
    only_tool = await client.complete(request())
    assert [b["type"] for b in only_tool.content] == ["tool_use"]
    assert only_tool.content[0]["input"] == {}
    assert (await client.complete(request())).content == []


async def test_default_reply_echoes_the_last_user_text(
    fake: FakeAnthropic, make_client: Any
) -> None:
    response, deltas = await stream_text(make_client(fake.base_url), request("ping"))
    assert response.content == [{"type": "text", "text": "echo: ping"}]
    assert "".join(deltas) == "echo: ping"


async def test_usage_and_cost_are_recorded(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(
        Reply.text(
            "ok",
            usage={
                "input_tokens": 1000,
                "output_tokens": 500,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 400,
            },
        )
    )
    response = await make_client(fake.base_url).complete(request(model="claude-opus-4-6"))
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens) == (1000, 500)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (2000, 400)
    expected = (1000 * 5 + 500 * 25 + 400 * 5 * 1.25 + 2000 * 5 * 0.1) / 1_000_000
    assert usage.cost_usd == pytest.approx(expected)
    assert response.model == "claude-opus-4-6"


async def test_one_hour_cache_writes_are_read_apart_and_priced_at_twice_the_input(
    fake: FakeAnthropic, make_client: Any
) -> None:
    split = {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 300}
    fake.queue(
        Reply.text(
            "ok",
            usage={
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 400,
                "cache_creation": split,
            },
        )
    )
    usage = (await make_client(fake.base_url).complete(request(model="claude-sonnet-5-5"))).usage
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (400, 300)
    expected = (10 * 3 + 1 * 15 + 100 * 3 * 1.25 + 300 * 3 * 2) / 1_000_000
    assert usage.cost_usd == pytest.approx(expected)


# ---- pricing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("claude-sonnet-4-5-20250929", Price(3, 15)),
        ("claude-sonnet-5-5", Price(3, 15)),
        ("claude-opus-4-6", Price(5, 25)),
        ("claude-opus-4-5-20251101", Price(5, 25)),
        ("claude-opus-4-1-20250805", Price(15, 75)),
        ("claude-3-opus-20240229", Price(15, 75)),
        ("claude-haiku-4-5", Price(1, 5)),
        ("claude-3-5-haiku-20241022", Price(0.8, 4)),
        ("some-future-model", Price(3, 15)),
    ],
)
def test_price_matches_model_family(model: str, price: Price) -> None:
    assert price_for(model) == price


def test_cost_prices_cache_writes_at_125_and_reads_at_10_percent_of_input() -> None:
    usage = Usage(cache_write_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert cost_usd("claude-sonnet-x", usage) == pytest.approx(3 * 1.25 + 3 * 0.1)
    hour = Usage(cache_write_tokens=1_000_000, cache_write_1h_tokens=1_000_000)
    assert cost_usd("claude-sonnet-x", hour) == pytest.approx(3 * 2)
    assert cost_usd("claude-sonnet-x", Usage(output_tokens=2_000_000)) == pytest.approx(30)


def test_context_window_defaults_to_200k() -> None:
    assert context_window("claude-sonnet-5-5") == 200_000
    assert context_window("anything") == 200_000


# ---- retries -------------------------------------------------------------------------------

TRANSIENT = {
    "429": Reply.http_error(429, "rate_limit_error", "Slow down"),
    "529": Reply.http_error(529, "overloaded_error", "Overloaded"),
    "500": Reply.http_error(500, "api_error"),
    "503": Reply.http_error(503, "api_error", "Unavailable"),
    "mid_stream_overloaded": Reply.stream_error("overloaded_error"),
    "reset_before_response": Reply.disconnect(),
    "reset_mid_stream": Reply.disconnect(partial_text=""),
}


@pytest.mark.parametrize("failure", list(TRANSIENT.values()), ids=list(TRANSIENT))
async def test_transient_failure_is_retried_until_success(
    fake: FakeAnthropic, make_client: Any, failure: Reply
) -> None:
    fake.queue(failure, failure, Reply.text("finally", chunk=3))
    response, deltas = await stream_text(make_client(fake.base_url), request())
    assert response.content == [{"type": "text", "text": "finally"}]
    assert "".join(deltas) == "finally"
    assert len(fake.requests) == 3


async def test_retry_waits_grow_exponentially(fake: FakeAnthropic, make_client: Any) -> None:
    sleeps = SleepLog()
    fake.queue(*[Reply.http_error(529, "overloaded_error")] * 4, Reply.text("ok"))
    client = make_client(fake.base_url, backoff_base=1.0, backoff_cap=5.0, sleep=sleeps)
    await client.complete(request())
    low = [0.8, 1.6, 3.2, 5.0]
    high = [1.2, 2.4, 4.8, 5.0]
    assert len(sleeps.delays) == 4
    for delay, lo, hi in zip(sleeps.delays, low, high, strict=True):
        assert lo <= delay <= hi


async def test_retry_after_header_is_honoured(fake: FakeAnthropic, make_client: Any) -> None:
    sleeps = SleepLog()
    fake.queue(Reply.http_error(429, "rate_limit_error", retry_after=7), Reply.text("ok"))
    await make_client(fake.base_url, sleep=sleeps).complete(request())
    assert sleeps.delays == [7.0]
    assert len(fake.requests) == 2


async def test_retry_after_is_capped(fake: FakeAnthropic, make_client: Any) -> None:
    sleeps = SleepLog()
    fake.queue(Reply.http_error(529, "overloaded_error", retry_after=3600), Reply.text("ok"))
    client = make_client(fake.base_url, sleep=sleeps, retry_after_cap=30)
    await client.complete(request())
    assert sleeps.delays == [30.0]


async def test_retry_after_really_delays_the_next_attempt(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(Reply.http_error(429, "rate_limit_error", retry_after=0.25), Reply.text("ok"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await make_client(fake.base_url).complete(request())
    assert loop.time() - started >= 0.25


async def test_connection_refused_is_retried_until_the_server_comes_up(
    make_client: Any,
) -> None:
    sock = closed_port_socket()
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with AsyncExitStack() as stack:
        servers: list[FakeAnthropic] = []

        async def start_server_then_wait(delay: float) -> None:
            if not servers:
                servers.append(await stack.enter_async_context(FakeAnthropic(sock=sock)))

        client = make_client(base_url, sleep=start_server_then_wait)
        response = await client.complete(request("after refusal"))
        assert response.content == [{"type": "text", "text": "echo: after refusal"}]
        assert len(servers[0].requests) == 1


async def test_retries_are_logged_without_the_api_key(
    fake: FakeAnthropic, make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(Reply.http_error(529, "overloaded_error"), Reply.text("ok"))
    with caplog.at_level(logging.DEBUG):
        await make_client(fake.base_url, max_attempts=4).complete(request())
    retries = [r for r in caplog.records if r.name == "agents.providers.retry"]
    assert [r.levelno for r in retries] == [logging.WARNING]
    assert "attempt 1/4" in retries[0].getMessage()
    assert "529" in retries[0].getMessage()
    assert KEY not in caplog.text


async def test_no_retry_once_text_reached_the_user(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(Reply.stream_error("overloaded_error", partial_text="Hel"), Reply.text("never"))
    client = make_client(fake.base_url)
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    with pytest.raises(ModelError, match="broke after the reply had started") as caught:
        await client.complete(request(), on_text)
    assert deltas == ["Hel"]
    assert len(fake.requests) == 1
    assert fake.pending == 1
    assert caught.value.retryable


async def test_connection_lost_after_text_is_not_retried(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(Reply.disconnect(partial_text="Partial"), Reply.text("never"))
    with pytest.raises(ModelError, match="incomplete"):
        await stream_text(make_client(fake.base_url), request())
    assert len(fake.requests) == 1


async def test_partial_text_without_a_listener_is_retried(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(Reply.stream_error("overloaded_error", partial_text="Hel"), Reply.text("Hello"))
    response = await make_client(fake.base_url).complete(request())
    assert response.content == [{"type": "text", "text": "Hello"}]
    assert len(fake.requests) == 2


async def test_listener_errors_propagate_unchanged_and_are_not_retried(
    fake: FakeAnthropic, make_client: Any
) -> None:
    async def broken_listener(delta: str) -> None:
        raise RuntimeError("channel down")

    with pytest.raises(RuntimeError, match="channel down"):
        await make_client(fake.base_url).complete(request(), broken_listener)
    assert len(fake.requests) == 1


# ---- errors that are not retried -----------------------------------------------------------


async def test_bad_request_is_not_retried_and_quotes_the_api(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(Reply.http_error(400, "invalid_request_error", "messages.0: content is empty"))
    with pytest.raises(ModelError) as caught:
        await make_client(fake.base_url).complete(request())
    assert str(caught.value) == (
        "The model API rejected the request (400): messages.0: content is empty"
    )
    assert caught.value.status == 400 and not caught.value.retryable
    assert len(fake.requests) == 1


async def test_rejected_api_key_is_not_retried_and_points_to_the_setting(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeAnthropic(api_key="the-right-key") as fake:
        client = make_client(fake.base_url)
        with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as caught:
            await client.complete(request())
    assert str(caught.value) == "The model API rejected the API key (401). Check ANTHROPIC_API_KEY."
    assert caught.value.status == 401
    assert len(fake.requests) == 1
    assert KEY not in caplog.text and KEY not in repr(client)


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        (403, "permission_error", "refused access (403)"),
        (404, "not_found_error", "does not know model 'claude-sonnet-test' (404)"),
        (413, "request_too_large", "too large for the model API (413)"),
    ],
)
async def test_client_errors_say_what_to_do(
    fake: FakeAnthropic, make_client: Any, status: int, error_type: str, expected: str
) -> None:
    fake.queue(Reply.http_error(status, error_type, "details"))
    with pytest.raises(ModelError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        await make_client(fake.base_url).complete(request())
    assert len(fake.requests) == 1


async def test_exhausted_attempts_raise_a_clear_message(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.default = lambda body: Reply.http_error(529, "overloaded_error")
    with pytest.raises(ModelError) as caught:
        await make_client(fake.base_url, max_attempts=3).complete(request())
    assert str(caught.value) == (
        "The model API is overloaded; gave up after 3 attempts. Try again in a few minutes."
    )
    assert caught.value.status == 529 and caught.value.retryable
    assert len(fake.requests) == 3


async def test_exhausted_server_errors_name_the_status(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.default = lambda body: Reply.http_error(502, "api_error")
    with pytest.raises(ModelError, match=r"server error \(502\); gave up after 2 attempts"):
        await make_client(fake.base_url, max_attempts=2).complete(request())


async def test_unreachable_api_names_the_address(make_client: Any) -> None:
    sock = closed_port_socket()
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with sock, pytest.raises(ModelError) as caught:
        await make_client(base_url, max_attempts=2).complete(request())
    message = str(caught.value)
    assert message.startswith(f"Could not reach the model API at {base_url}")
    assert "gave up after 2 attempts" in message
    assert "providers.anthropic.base_url" in message


async def test_a_host_that_never_accepts_a_connection_counts_as_unreachable(
    make_client: Any,
) -> None:
    # A blackholed host would otherwise hold each attempt for the whole 600 s timeout.
    with unaccepting_port() as port, pytest.raises(ModelError) as caught:
        base_url = f"http://127.0.0.1:{port}"
        await make_client(base_url, max_attempts=3, connect_timeout=0.3).complete(request())
    assert caught.value.kind == "unreachable" and caught.value.may_fall_back
    assert str(caught.value).startswith(f"Could not reach the model API at {base_url} (Connect")


async def test_unanswered_request_times_out_and_is_retried(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.default = lambda body: Reply.hang()
    with pytest.raises(ModelError, match=r"did not answer within 0.2 s; gave up after 2"):
        await make_client(fake.base_url, max_attempts=2, timeout=0.2).complete(request())
    assert len(fake.requests) == 2


# ---- fallback models -----------------------------------------------------------------------


def overloaded_unless(model: str) -> Callable[[dict[str, Any]], Reply]:
    def answer(body: dict[str, Any]) -> Reply:
        if body["model"] == model:
            return Reply.text(f"from {model}")
        return Reply.http_error(529, "overloaded_error")

    return answer


async def test_fallback_model_is_used_after_the_primary_gives_up(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.default = overloaded_unless("claude-haiku-backup")
    client = make_client(
        fake.base_url,
        max_attempts=2,
        fallback_models=["claude-sonnet-other", "claude-haiku-backup"],
    )
    response = await client.complete(request(model="claude-sonnet-test"))
    assert response.content == [{"type": "text", "text": "from claude-haiku-backup"}]
    assert response.model == "claude-haiku-backup"
    assert [r["model"] for r in fake.requests] == [
        "claude-sonnet-test",
        "claude-sonnet-test",
        "claude-sonnet-other",
        "claude-sonnet-other",
        "claude-haiku-backup",
    ]


async def test_unknown_model_falls_back_at_once(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(Reply.http_error(404, "not_found_error", "model: claude-gone"))
    client = make_client(fake.base_url, fallback_models=["claude-sonnet-backup"])
    response = await client.complete(request("hi", model="claude-gone"))
    assert [r["model"] for r in fake.requests] == ["claude-gone", "claude-sonnet-backup"]
    assert response.content == [{"type": "text", "text": "echo: hi"}]


async def test_bad_request_does_not_fall_back(fake: FakeAnthropic, make_client: Any) -> None:
    fake.queue(Reply.http_error(400, "invalid_request_error", "bad"))
    client = make_client(fake.base_url, fallback_models=["claude-sonnet-backup"])
    with pytest.raises(ModelError, match=r"\(400\)"):
        await client.complete(request())
    assert len(fake.requests) == 1


async def test_every_model_failing_names_the_models_tried(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.default = overloaded_unless("none")
    client = make_client(fake.base_url, max_attempts=1, fallback_models=["claude-haiku-backup"])
    with pytest.raises(ModelError, match="Tried models: claude-sonnet-test, claude-haiku-backup"):
        await client.complete(request())
    assert len(fake.requests) == 2


# ---- backoff schedule and retry-after parsing (pure) ---------------------------------------


@pytest.mark.parametrize(
    ("rand", "expected"),
    [
        (0.5, [2, 4, 8, 16, 32, 60, 60, 60]),
        (0.0, [1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 60, 60]),
        (1.0, [2.4, 4.8, 9.6, 19.2, 38.4, 60, 60, 60]),
    ],
)
def test_backoff_schedule_doubles_from_base_with_jitter_and_cap(
    rand: float, expected: list[float]
) -> None:
    delays = [backoff_delay(n, 2.0, 60.0, 0.2, rand=lambda: rand) for n in range(1, 9)]
    assert delays == pytest.approx(expected)


@pytest.mark.parametrize(
    ("retry_after", "cap", "expected"),
    [(5.0, 120.0, 5.0), (500.0, 120.0, 120.0), (0.0, 120.0, 0.0), (7.5, 7.5, 7.5)],
)
def test_backoff_honours_retry_after_up_to_its_cap(
    retry_after: float, cap: float, expected: float
) -> None:
    assert backoff_delay(3, 2.0, 60.0, 0.2, retry_after, cap) == expected


@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0.001, max_value=10),
    cap=st.floats(min_value=0.001, max_value=1000),
    rand=st.floats(min_value=0, max_value=1),
)
def test_backoff_stays_within_jitter_band_and_cap(
    attempt: int, base: float, cap: float, rand: float
) -> None:
    delay = backoff_delay(attempt, base, cap, 0.2, rand=lambda: rand)
    raw = base * 2.0 ** min(attempt - 1, 62)
    assert min(raw * 0.8, cap) * (1 - 1e-9) <= delay <= min(raw * 1.2, cap) * (1 + 1e-9)
    assert 0 < delay <= cap


@given(attempt=st.integers(min_value=1, max_value=50))
def test_backoff_with_real_randomness_stays_in_band(attempt: int) -> None:
    delay = backoff_delay(attempt, 2.0, 60.0)
    raw = 2.0 * 2.0 ** (attempt - 1)
    assert min(raw * 0.8, 60.0) <= delay <= min(raw * 1.2, 60.0)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 2026 00:00:10 GMT"}, 10.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-4"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers: dict[str, str], expected: float | None) -> None:
    now = 1767225600.0  # 2026-01-01T00:00:00Z
    assert parse_retry_after(headers, now=now) == expected


@given(value=st.text(max_size=40), millis=st.one_of(st.none(), st.text(max_size=20)))
def test_retry_after_parsing_never_raises_nor_goes_negative(value: str, millis: str | None) -> None:
    headers = {"retry-after": value} if millis is None else {"retry-after-ms": millis}
    result = parse_retry_after(headers, now=0.0)
    assert result is None or result >= 0


# ---- lifecycle ------------------------------------------------------------------------------


def test_importing_the_provider_does_not_import_the_sdk() -> None:
    code = (
        "import sys, agents.providers.anthropic as a, agents.providers.openai as o; "
        "a.AnthropicClient('k'); o.OpenAIClient('k'); "
        "sys.exit(1 if 'anthropic' in sys.modules or 'openai' in sys.modules else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr.decode()


async def test_aclose_is_safe_before_use_and_twice(fake: FakeAnthropic) -> None:
    client = AnthropicClient(KEY, fake.base_url)
    await client.aclose()
    await client.complete(request())
    await client.aclose()
    await client.aclose()


async def test_cancelling_a_call_disconnects_from_the_server(
    fake: FakeAnthropic, make_client: Any
) -> None:
    fake.queue(Reply.hang())
    task = asyncio.create_task(make_client(fake.base_url).complete(request()))
    await fake.wait_requests(1)
    assert fake.in_flight == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_idle()


# ---- the fake itself (used by the whole suite) ----------------------------------------------


async def test_fake_answers_non_streaming_requests_with_a_message(fake: FakeAnthropic) -> None:
    from anthropic import AsyncAnthropic

    fake.queue(Reply.tool_use([("list_dir", {"path": "."}, "toolu_1")], text="Looking"))
    async with AsyncAnthropic(api_key=KEY, base_url=fake.base_url, max_retries=0) as sdk:
        message = await sdk.messages.create(
            model="claude-sonnet-test",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
        )
        counted = await sdk.messages.count_tokens(
            model="claude-sonnet-test", messages=[{"role": "user", "content": "hi"}]
        )
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.stop_reason == "tool_use"
    assert counted.input_tokens > 0
    assert "stream" not in fake.requests[0]


async def test_fake_rejects_requests_without_credentials(fake: FakeAnthropic) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{fake.base_url}/v1/messages", json={"messages": []}) as response,
    ):
        assert response.status == 401
        body = await response.json()
    assert body["error"]["type"] == "authentication_error"


async def test_fake_tracks_concurrent_requests(fake: FakeAnthropic, make_client: Any) -> None:
    release = asyncio.Event()
    fake.queue(Reply.text("a", hold=release), Reply.text("b", hold=release))
    client = make_client(fake.base_url)
    calls = [asyncio.create_task(client.complete(request())) for _ in range(2)]
    await fake.wait_requests(2)
    assert fake.in_flight == 2
    release.set()
    texts = sorted(r.content[0]["text"] for r in await asyncio.gather(*calls))
    assert texts == ["a", "b"]
    assert fake.max_in_flight == 2


async def test_fake_wait_requests_times_out_with_a_count(fake: FakeAnthropic) -> None:
    with pytest.raises(TimeoutError, match="received 0 of 1"):
        await fake.wait_requests(1, timeout=0.05)
