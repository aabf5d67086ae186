"""Perch's requests read Anthropic's prompt cache: the bytes before each breakpoint stay the
same from turn to turn, a memory edit leaves the tools and persona alone, compaction starts
where the chat stands, and `agent.cache.ttl: auto` takes the hour for a chat paced minutes
apart. The requests are Perch's own (the daemon's graph through `tests.chat_replay`, the real
SDK on the wire); the cache is `tests.fakes.prompt_cache`, whose rules are checked first."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.model import ModelError, ModelRequest
from agents.pricing import usage_summary
from agents.providers.anthropic import AnthropicClient
from bot.config.agent import BudgetConfig
from bot.kernel.budget import Budget
from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.openai import FakeOpenAI
from tests.fakes.prompt_cache import PromptCache, prompt_blocks
from tests.turn_text import TIME_STAMP

_MARK = re.compile(rb',"cache_control":\{[^}]*\}')


def marked_prefixes(raw: bytes) -> list[bytes]:
    """The prompt of a request body (from its tools on) up to the end of each marked block,
    the marks themselves left out: what the cache keys each breakpoint's prefix by."""
    start = raw.index(b'"tools":')
    prefixes = []
    for mark in _MARK.finditer(raw):
        assert raw[mark.end() : mark.end() + 1] == b"}", "a marked block ends with its mark"
        prefixes.append(_MARK.sub(b"", raw[start : mark.end() + 1]))
    return prefixes


def system_text(body: dict[str, Any]) -> str:
    return "".join(b["text"] for b in body["system"])


# --- the model of the cache ------------------------------------------------------------------


def body(*texts: str, marks: dict[int, str] | None = None) -> dict[str, Any]:
    """A request whose messages' blocks are `texts` in one user message, marked at `marks`
    (block index -> ttl)."""
    blocks: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if marks and i in marks:
            block["cache_control"] = {"type": "ephemeral", "ttl": marks[i]}
        blocks.append(block)
    return {"model": "m", "messages": [{"role": "user", "content": blocks}]}


def test_the_cache_reads_a_prefix_within_its_life_and_writes_it_again_after() -> None:
    cache = PromptCache(min_tokens=100)
    big = "x" * 4000  # 1,000 tokens
    first = cache.account(body(big, "a", marks={0: "5m"}), now=0)
    assert (first.write_5m, first.read, first.input) == (1000, 0, 1)
    assert cache.account(body(big, "b", marks={0: "5m"}), now=299).read == 1000
    assert cache.account(body(big, "c", marks={0: "5m"}), now=598).read == 1000  # refreshed
    late = cache.account(body(big, "d", marks={0: "5m"}), now=899)
    assert (late.read, late.write_5m) == (0, 1000)
    hour = PromptCache(min_tokens=100)
    hour.account(body(big, marks={0: "1h"}), now=0)
    assert hour.account(body(big, "e", marks={0: "1h"}), now=3000).read == 1000


def test_a_moving_breakpoint_reads_back_at_most_twenty_blocks() -> None:
    cache = PromptCache(min_tokens=1)
    turns = [f"turn {i} " + "y" * 40 for i in range(40)]
    cache.account(body(*turns[:5], marks={4: "5m"}), now=0)
    near = cache.account(body(*turns[:24], marks={23: "5m"}), now=1)  # 19 blocks on
    assert near.read == sum(-(-len(t) // 4) for t in turns[:5])
    far = cache.account(body(*turns[:40], marks={39: "5m"}), now=2)  # 16 more: found
    assert far.read > near.read
    beyond = PromptCache(min_tokens=1)
    beyond.account(body(*turns[:5], marks={4: "5m"}), now=0)
    assert beyond.account(body(*turns[:26], marks={25: "5m"}), now=1).read == 0  # 21 on


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(cache=PromptCache()) as server:
        yield server


async def test_requests_breaking_the_caches_rules_are_refused_as_the_api_does(
    fake: FakeAnthropic,
) -> None:
    client = AnthropicClient("sk-test", fake.base_url, max_attempts=1)
    five = body("a", "b", "c", "d", "e", marks=dict.fromkeys(range(5), "5m"))
    mixed = body("a", "b", marks={0: "5m", 1: "1h"})
    try:
        for wrong, says in ((five, "A maximum of 4 blocks"), (mixed, "must not come after")):
            request = ModelRequest("m", [], wrong["messages"], max_tokens=10)
            with pytest.raises(ModelError, match=says) as failed:
                await client.complete(request)
            assert failed.value.kind == "bad_request"
    finally:
        await client.aclose()


# --- Perch's requests --------------------------------------------------------------------------


async def test_each_breakpoints_prefix_is_the_same_bytes_on_every_turn(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.queue(
        Reply.text("Hello Ada."),
        Reply.tool_use([("memory_search", {"query": "birthday"}), ("list_dir", {})]),
        Reply.text("Nothing about birthdays yet."),
        Reply.text("Noted."),
    )
    async with ChatReplay(fake, tmp_path) as chat:
        for text in ("I'm Ada", "any birthdays coming up?", "mine is in May"):
            await chat.say(text)
            chat.advance(61)  # a minute apart: the time on each message moves
    prefixes = [marked_prefixes(raw) for raw in fake.raw]
    assert [len(p) for p in prefixes] == [3, 4, 4, 4]  # persona, skills, history marks
    for earlier, later in itertools.pairwise(prefixes):
        assert later[0] == earlier[0] and later[1] == earlier[1]  # tools + persona; skills
        assert later[2] == earlier[-1]  # read exactly where the last request ended
    assert len({system_text(b) for b in fake.requests}) == 1  # no clock in the system prompt
    stamps = [fake.requests[i]["messages"][-1]["content"][0]["text"] for i in (0, 1, 3)]
    assert all(TIME_STAMP.fullmatch(s) for s in stamps) and len(set(stamps)) == 3  # with the user
    uses = fake.cache.requests if fake.cache else []
    assert all(u.read > 0 and u.input == 0 for u in uses[1:])
    assert all(u.write < u.read / 4 for u in uses[1:])  # each writes only what it added


async def test_a_memory_edit_leaves_the_tools_and_persona_prefix_unchanged(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    async with ChatReplay(fake, tmp_path) as chat:
        await chat.say("hello")
        (chat.workspace / "MEMORY.md").write_text("- Ada's birthday is 12 May.\n")
        chat.advance(60)
        await chat.say("remember anything?")
    before, after = (marked_prefixes(raw) for raw in fake.raw)
    assert after[0] == before[0]  # the tools and the persona: still cached, for every chat
    assert after[1] != before[1] and b"12 May" in after[1]
    assert fake.cache is not None
    edited = fake.cache.requests[1]
    assert edited.read == tokens_through_mark(fake.requests[1], 0) > 1000  # read, not written


def tokens_through_mark(body: dict[str, Any], mark: int) -> int:
    """The tokens of a request up to its `mark`-th breakpoint, by the cache's own count."""
    blocks = prompt_blocks(body)
    end = [i for i, b in enumerate(blocks) if b.ttl is not None][mark]
    return sum(b.tokens for b in blocks[: end + 1])


async def test_the_compaction_requests_share_the_chats_prefix(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        asked = last_user_text(body)
        if asked.startswith("[Automatic compaction]"):
            return Reply.text("- Ada has a cat called Miso.")
        if "Automatic memory flush" in asked:
            if body["messages"][-1]["content"][0].get("type") == "tool_result":
                return Reply.text("NO_REPLY")
            return Reply.tool_use([("memory_append", {"text": "Ada's cat: Miso"})])
        return Reply.text("echo: " + asked)

    fake.default = answer
    async with ChatReplay(fake, tmp_path) as chat:
        for text in ("I'm Ada", "my cat is Miso", "she is grey", "and fluffy"):
            await chat.say(text)
            chat.advance(30)
        chats = len(fake.raw)
        assert await chat.compact() == "Compacted: 4 older messages are now a summary."
        session = await chat.store.session(str(chat.key))  # type: ignore[union-attr]
    last_chat = marked_prefixes(fake.raw[chats - 1])[-1]
    flush, flush_after_tool, summary = (marked_prefixes(raw) for raw in fake.raw[chats:])
    assert flush[2] == last_chat  # the flush reads the whole chat from the cache ...
    assert flush_after_tool[2] == flush[-1]  # ... and its own first step
    assert summary[-1] == last_chat and len(summary) == 3  # the summary marks nothing new
    assert fake.requests[chats]["tools"] == fake.requests[chats - 1]["tools"]
    assert session.summary == "- Ada has a cat called Miso."
    assert fake.cache is not None
    flush_use, _, summary_use = fake.cache.requests[chats:]
    assert flush_use.read >= fake.cache.requests[chats - 1].total - 1
    assert summary_use.write == 0 and summary_use.read == flush_use.read


async def test_a_memory_flush_may_call_only_its_tools_though_all_are_offered(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        asked = last_user_text(body)
        if asked.startswith("[Automatic compaction]"):
            return Reply.text("- A summary.")
        if "Automatic memory flush" in asked:
            if body["messages"][-1]["content"][0].get("type") == "tool_result":
                return Reply.text("NO_REPLY")
            return Reply.tool_use([("cron", {"action": "list"})])
        return Reply.text("ok")

    fake.default = answer
    async with ChatReplay(fake, tmp_path) as chat:
        for text in ("one", "two", "three"):
            await chat.say(text)
        await chat.compact()
    refused = fake.requests[-2]["messages"][-1]["content"][0]
    assert refused["is_error"] is True
    assert refused["content"].startswith("Error: cron cannot be used now; only: ")


@pytest.mark.parametrize(
    ("ttl", "gap", "history_mark"),
    [("auto", 360, "1h"), ("auto", 20, None), ("5m", 360, None), ("1h", 20, "1h")],
)
async def test_the_cache_life_follows_the_setting_and_the_chats_pace(
    fake: FakeAnthropic, tmp_path: Path, ttl: str, gap: float, history_mark: str | None
) -> None:
    async with ChatReplay(fake, tmp_path, {"agent.cache": {"ttl": ttl}}) as chat:
        for text in ("one", "two", "three", "four"):
            await chat.say(text)
            chat.advance(gap)
    last = fake.requests[-1]
    system_marks = [b["cache_control"].get("ttl") for b in last["system"] if "cache_control" in b]
    history_marks = [
        b["cache_control"].get("ttl")
        for m in last["messages"]
        for b in m["content"]
        if "cache_control" in b
    ]
    assert system_marks == ["5m" if ttl == "5m" else "1h"] * 2 or system_marks == [None] * 2
    assert history_marks == [history_mark] * 2
    assert fake.cache is not None
    reads = [u.read for u in fake.cache.requests]
    if ttl == "5m":  # six minutes apart: all but the tools and persona written again
        assert reads[1:] == [0, 0, 0]
    else:
        assert all(r > 0 for r in reads[2:])


async def test_openai_compatible_requests_keep_the_same_prefix_too(tmp_path: Path) -> None:
    async with FakeOpenAI() as local, ChatReplay(local, tmp_path) as chat:
        await chat.say("hello")
        chat.advance(120)
        await chat.say("and again")
    first, second = local.raw
    earlier = first[first.index(b'"messages":') : -2]  # the first request's messages, open
    assert earlier in second  # byte for byte the start of the second request's messages
    assert local.requests[0]["tools"] == local.requests[1]["tools"]


async def test_cache_reads_and_writes_are_counted_at_their_own_prices(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    async with ChatReplay(fake, tmp_path) as chat:  # auto: the shared prefix for an hour
        for text in ("hello", "how are you?", "bye"):
            await chat.say(text)
            chat.advance(60)
        assert chat.store is not None and chat.config is not None
        today = await chat.store.usage_since(0)
        budget = Budget(BudgetConfig(daily_usd=10), chat.store)
        spent = await budget.spent_today()
    assert fake.cache is not None
    uses = fake.cache.requests
    assert (today.cache_read_tokens, today.cache_write_tokens) == (
        sum(u.read for u in uses),
        sum(u.write for u in uses),
    )
    assert today.cache_write_tokens > sum(u.write_1h for u in uses) > 0  # both lives used
    sonnet = 3 / 1_000_000  # per input token
    expected = (
        sum(
            u.input * sonnet
            + u.read * sonnet * 0.1
            + u.write_5m * sonnet * 1.25
            + u.write_1h * sonnet * 2
            for u in uses
        )
        + today.output_tokens * 15 / 1_000_000
    )
    assert today.cost_usd == pytest.approx(expected)
    assert spent == pytest.approx(expected)  # the daily budget counts the same
    assert f"{today.cache_read_tokens:,} read from the prompt cache" in usage_summary(today)
