"""The pure parts of metrics and tracing: the listen address parser, the collector address
the exporter uses, and the GenAI message JSON a span records."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import Message, text_block, tool_result_block, tool_use_block
from bot.config.observe import TracingConfig, is_loopback, split_listen, traces_endpoint
from bot.observe.spans import MAX_CONTENT_CHARS, MAX_PART_CHARS, input_messages


@given(st.ip_addresses(v=4), st.integers(0, 65535))
def test_an_ipv4_listen_address_splits_into_host_and_port(
    host: ipaddress.IPv4Address, port: int
) -> None:
    assert split_listen(f"{host}:{port}") == (str(host), port)


@given(st.ip_addresses(v=6), st.integers(0, 65535))
def test_an_ipv6_listen_address_needs_its_brackets(host: ipaddress.IPv6Address, port: int) -> None:
    assert split_listen(f"[{host}]:{port}") == (str(host), port)
    if ":" in str(host):
        with pytest.raises(ValueError, match="brackets"):
            split_listen(f"{host}:{port}")


@given(st.text(max_size=40))
def test_any_listen_text_is_an_address_or_a_value_error(text: str) -> None:
    try:
        host, port = split_listen(text)
    except ValueError as exc:
        assert str(exc)  # says what is wrong
    else:
        assert host and 0 <= port <= 65535


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("metrics.example.org", False),
    ],
)
def test_only_loopback_listens_go_without_a_token(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("endpoint", "env", "expected"),
    [
        (None, {}, "http://localhost:4318/v1/traces"),
        ("http://collector:4318", {}, "http://collector:4318/v1/traces"),
        ("http://collector:4318/", {}, "http://collector:4318/v1/traces"),
        ("https://otlp.example/v1/traces", {}, "https://otlp.example/v1/traces"),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}, "http://a:4318/v1/traces"),
        (
            None,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9999/custom",
            },
            "http://b:9999/custom",
        ),
        (
            "http://mine:4318",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a"},
            "http://mine:4318/v1/traces",
        ),
    ],
)
def test_the_collector_address_follows_the_sdk_order(
    monkeypatch: pytest.MonkeyPatch, endpoint: str | None, env: dict[str, str], expected: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert traces_endpoint(TracingConfig(enabled=True, endpoint=endpoint)) == expected


_texts = st.text(max_size=MAX_PART_CHARS + 200)
_messages = st.lists(
    st.one_of(
        _texts.map(lambda t: Message(role="user", content=[text_block(t)])),
        _texts.map(lambda t: Message(role="assistant", content=[text_block(t)])),
        _texts.map(
            lambda t: Message(role="assistant", content=[tool_use_block("toolu_1", "x", {"q": t})])
        ),
        _texts.map(lambda t: Message(role="user", content=[tool_result_block("toolu_1", t)])),
    ),
    min_size=1,
    max_size=12,
)


@given(_messages)
def test_input_messages_are_whole_json_with_the_newest_kept(messages: list[Message]) -> None:
    recorded = input_messages(messages)
    parsed = json.loads(recorded)
    assert 1 <= len(parsed) <= len(messages)
    assert len(parsed) == 1 or len(recorded) <= MAX_CONTENT_CHARS
    kept = messages[-len(parsed) :]  # the newest, in order
    assert [m["role"] for m in parsed] == [m["role"] for m in kept]
    newest = parsed[-1]["parts"][0]
    block = messages[-1]["content"][0]
    if block["type"] == "text":
        assert newest["type"] == "text" and block["text"].startswith(
            newest["content"].removesuffix("… [cut]")
        )
