"""Cutting MCP messages while they are read: always valid JSON, never more than the caps.

Property tests over arbitrary JSON fed in arbitrary pieces: small messages come out
unchanged; with small caps every string is its own head plus a note (cut on a character
boundary, never inside an escape); too much structure becomes a JSON-RPC error for the
request it answered. Also the stderr cleaner the transport logs through.
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.mcp import cutter
from agents.mcp.cutter import JsonCutter
from agents.mcp.stdio import StderrLog, clean_stderr_line

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text, inner, max_size=5),
    max_leaves=30,
)


def cut(raw: bytes, sizes: list[int]) -> bytes | None:
    """`raw` fed to a cutter in pieces of the given sizes (then the rest)."""
    machine = JsonCutter()
    start = 0
    for size in sizes:
        machine.feed(raw[start : start + size])
        start += size
    machine.feed(raw[start:])
    return machine.finish()


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@given(value=_json, ascii_only=st.booleans(), sizes=st.lists(st.integers(1, 9), max_size=40))
def test_small_messages_pass_unchanged_whatever_the_pieces(
    value: Any, ascii_only: bool, sizes: list[int]
) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": value}
    raw = json.dumps(message, ensure_ascii=ascii_only).encode()
    out = cut(raw, sizes)
    assert out is not None and json.loads(out) == message


@settings(max_examples=300)
@given(
    value=_json,
    ascii_only=st.booleans(),
    cap=st.integers(0, 12),
    sizes=st.lists(st.integers(1, 9), max_size=40),
)
def test_with_small_caps_every_string_is_its_head_and_a_note(
    value: Any, ascii_only: bool, cap: int, sizes: list[int]
) -> None:
    with patch.object(cutter, "TEXT_CAP", cap):
        message = {"jsonrpc": "2.0", "id": 3, "result": {"text": value}}
        out = cut(json.dumps(message, ensure_ascii=ascii_only).encode(), sizes)
    assert out is not None
    got = json.loads(out)  # valid JSON: no escape or character was cut in two
    assert got["id"] == 3
    for original, shown in zip(strings(message["result"]), strings(got["result"]), strict=True):
        head, _, note = shown.partition("\n[... cut while reading: ")
        assert original.startswith(head)
        assert note == "" or note.endswith(" more bytes of this not read]")


def test_a_30_mb_string_keeps_a_megabyte_and_says_how_much_it_dropped() -> None:
    body = b'{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"'
    machine = JsonCutter()
    machine.feed(body)
    for _ in range(30):
        machine.feed(b"x" * 1_000_000)
        assert len(machine.out) < cutter.TEXT_CAP + 1000  # never more held than the cap
    machine.feed(b'"}]}}')
    out = machine.finish()
    assert out is not None
    text = json.loads(out)["result"]["content"][0]["text"]
    assert text.startswith("x" * 1000) and "29,000,000 more bytes" in text


def test_an_image_may_be_as_long_as_one_perch_would_show() -> None:
    data = "A" * (cutter.DATA_CAP - 100)
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "image", "data": data}]}}
    out = cut(json.dumps(message).encode(), [])
    assert out is not None and json.loads(out) == message


def test_too_much_structure_answers_the_request_with_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cutter, "STRUCTURE_CAP", 200)
    flood = {"jsonrpc": "2.0", "id": "req-7", "result": {"numbers": list(range(1000))}}
    out = cut(json.dumps(flood).encode(), [50] * 10)
    assert out is not None
    answer = json.loads(out)
    assert answer["id"] == "req-7" and "dropped while it was read" in answer["error"]["message"]
    notification = {"jsonrpc": "2.0", "method": "x", "params": {"n": list(range(1000))}}
    assert cut(json.dumps(notification).encode(), []) is None


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"\x1b[31mERROR\x1b[0m forged\r\n", "ERROR forged"),
        (b"ok \x1b]0;title\x07tail\n", "ok tail"),
        (b"bell\x07 and nul\x00 and del\x7f\n", "bell and nul and del"),
        (b"bidi \xe2\x80\xae reversed\n", "bidi  reversed"),
        ("caf\u00e9 \u2603\n".encode(), "caf\u00e9 \u2603"),
        (b"\xff\xfe broken utf-8\n", "\ufffd\ufffd broken utf-8"),
    ],
)
def test_stderr_lines_lose_every_control_character(raw: bytes, shown: str) -> None:
    assert clean_stderr_line(raw) == shown


@given(st.binary(max_size=300))
def test_no_stderr_line_keeps_a_control_character(raw: bytes) -> None:
    text = clean_stderr_line(raw)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text)


def test_stderr_is_rate_limited_and_the_rest_counted() -> None:
    now = [0.0]
    log = StderrLog("demo", clock=lambda: now[0])
    logged: list[str] = []
    log.logger.info = lambda fmt, text: logged.append(text)  # type: ignore[method-assign]
    for n in range(100):
        log.line(f"line {n}\n".encode())
    assert len(logged) == 20 and log.dropped == 80
    now[0] = 10.0  # ten seconds later: room for more, and the count is told
    warned: list[str] = []
    log.logger.warning = lambda fmt, *args: warned.append(fmt % args)  # type: ignore[method-assign]
    log.line(b"later\n")
    assert warned == ["80 more stderr line(s) of mcp server demo not logged (too many)"]
    assert logged[-1] == "later"
