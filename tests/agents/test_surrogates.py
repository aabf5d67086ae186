"""Lone UTF-16 surrogates ("\\ud800" in a JSON escape) and NUL from a platform or from the
model: the message is answered, the reply is sent, and the session's history stays sendable
(and storable in PostgreSQL, whose text refuses NUL). A NUL in a user's message is left for
the input guard, which reports it (`null_bytes`) and keeps it from the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.surrogates import REPLACEMENT, fix_data, fix_text
from bot.daemon import Daemon
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config

pytestmark = pytest.mark.timeout(60)

ANY_CHAR = st.characters(exclude_categories=())  # surrogates included
TEXT = st.text(ANY_CHAR, max_size=40)
JSON_LIKE = st.recursive(
    st.none() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(TEXT)
def test_fixed_text_is_utf8_of_the_same_length(text: str) -> None:
    fixed = fix_text(text)
    fixed.encode("utf-8")
    assert len(fixed) == len(text)
    assert all(
        a == b or (b == REPLACEMENT and (a == "\x00" or 0xD800 <= ord(a) <= 0xDFFF))
        for a, b in zip(text, fixed, strict=True)
    )


@given(TEXT)
def test_keep_nul_fixes_only_the_surrogates(text: str) -> None:
    fixed = fix_text(text, keep_nul=True)
    fixed.encode("utf-8")
    assert fixed.count("\x00") == text.count("\x00")
    assert fixed.replace("\x00", REPLACEMENT) == fix_text(text)


@given(st.text(max_size=40))
def test_text_without_surrogates_or_nul_is_returned_as_is(text: str) -> None:
    assert fix_text(text) is text or "\x00" in text


@given(JSON_LIKE)
def test_fixed_data_encodes_and_keeps_clean_parts(value: Any) -> None:
    import json

    fixed = fix_data(value)
    json.dumps(fixed, ensure_ascii=False).encode("utf-8")
    if json.dumps(value) == json.dumps(fixed):  # nothing to fix: not copied
        assert fixed is value


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_lone_surrogates_from_telegram_and_from_the_model(
    tmp_path: Path, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeTelegram() as tg:
        channel = {"enabled": True, "token": TOKEN, "base_url": tg.base_url, "allow_from": ["42"]}
        config = make_config(tmp_path, model.base_url, {"channels.telegram": channel})
        daemon = Daemon(config)
        await daemon.start()
        try:
            tg.dm("hi \ud800 there\x00", user_id=42)  # sent as a \ud800 escape, as JSON allows
            await tg.wait_for("sendMessage", 1, timeout=10)
            # The NUL is the input guard's: reported, and kept from the model.
            assert tg.texts()[-1] == f"echo: hi {REPLACEMENT} there"
            assert "patterns=null_bytes" in caplog.text

            model.queue(Reply.text("a broken \udfff reply"))
            tg.dm("second", user_id=42)
            await tg.wait_for("sendMessage", 2, timeout=10)
            assert tg.texts()[-1] == f"a broken {REPLACEMENT} reply"

            tg.dm("third", user_id=42)  # the history with both is still sendable
            await tg.wait_for("sendMessage", 3, timeout=10)
            assert tg.texts()[-1] == "echo: third"
            assert last_user_text(model.requests[-1]) == "third"
            sent = str(model.requests[-1]["messages"])
            assert f"hi {REPLACEMENT} there" in sent and f"a broken {REPLACEMENT} reply" in sent
            assert daemon.store is not None
            (session,) = await daemon.store.list_sessions()
            assert len(await daemon.store.messages(session.id)) == 6  # three turns, all saved
        finally:
            await daemon.stop()
