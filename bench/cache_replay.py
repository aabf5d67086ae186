"""Benchmark 12: what a conversation costs with Anthropic's prompt cache, at the pace people chat.

A recorded 30-turn Telegram DM (`bench.cache_conversation`: plain messages, tool turns, a
long pasted message, a photo, a long document written to a file, an edit of MEMORY.md,
compaction after turn 20) is replayed through Perch's own request building: the daemon's
object graph (`tests.chat_replay`: the real PromptBuilder, history pipeline, tools, agent
loop, compaction and the Anthropic provider with its body encoder) against the fake
Messages API, whose model of the prompt cache (`tests.fakes.prompt_cache`: a prefix up to a
`cache_control` breakpoint, byte for byte, 5-minute or 1-hour life refreshed on use, at most
four breakpoints, the 20-block lookback) reports what each request read and wrote. The
replay's clock puts 0, 1 or 6 minutes between turns (model calls within a turn are
immediate), for each `agent.cache.ttl`.

Figures per pace and setting, over the chat's requests from turn 3 on: the share of input
tokens read from the cache, and input cost against no cache at all (reads 0.1x, 5-minute
writes 1.25x, 1-hour writes 2x the input price); the compaction's two requests apart; and the
fixed prefix (tools and system prompt) of the first request. Tokens are Perch's estimate (4
characters a token, 1,600 an image), as the cache model counts them.

    .venv/bin/python -m bench.cache_replay
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.cache_conversation import COMPACT_AFTER, COMPACTION, CONVERSATION, Step
from bench.report import Report, parser
from channels.base import Image
from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.prompt_cache import CacheUse, PromptCache, prompt_blocks

PACES = (0.0, 60.0, 360.0)  # seconds between turns
SETTINGS = ("5m", "1h", "auto")
FROM_TURN = 3
# A small JPEG-sized payload: the cache model counts an image as 1,600 tokens whatever its size.
PHOTO = Image("image/jpeg", base64.b64decode(base64.b64encode(b"\xff\xd8\xff" + b"\x00" * 4000)))


@dataclass(slots=True)
class Replay:
    """What one replay measured: each turn's requests, the compaction's, the prefix."""

    turns: list[list[CacheUse]] = field(default_factory=list)
    compaction: list[CacheUse] = field(default_factory=list)
    prefix_tokens: int = 0


def replies(steps: list[Step], turn: int) -> list[Reply]:
    out = []
    for n, (kind, what) in enumerate(steps):
        if kind == "text":
            out.append(Reply.text(what))
        else:
            calls = [
                (name, args, f"toolu_t{turn:02d}_{n}_{i}") for i, (name, args) in enumerate(what)
            ]
            out.append(Reply.tool_use(calls))
    return out


async def replay(gap: float, ttl: str) -> Replay:
    measured = Replay()
    cache = PromptCache()
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeAnthropic(cache=cache)
        settings = {"agent.cache": {"ttl": ttl}, "agent.compaction": {"max_messages": 1000}}
        async with fake, ChatReplay(fake, Path(tmp), settings) as chat:  # compacts at turn 20
            for number, exchange in enumerate(CONVERSATION, start=1):
                fake.queue(*replies(exchange.steps, number))
                before = len(cache.requests)
                await chat.say(exchange.user, images=(PHOTO,) if exchange.photo else ())
                measured.turns.append(cache.requests[before:])
                if number == COMPACT_AFTER:
                    fake.queue(*replies(COMPACTION, 0))
                    before = len(cache.requests)
                    said = await chat.compact()
                    assert said.startswith("Compacted"), said
                    measured.compaction = cache.requests[before:]
                chat.advance(gap)
            assert fake.pending == 0, "the recorded replies and the requests went out of step"
            first = prompt_blocks(fake.requests[0])
            fixed = len(fake.requests[0]["tools"]) + len(fake.requests[0]["system"])
            measured.prefix_tokens = sum(b.tokens for b in first[:fixed])
    return measured


def read_share(uses: list[CacheUse]) -> float:
    total = sum(u.total for u in uses)
    return sum(u.read for u in uses) / total if total else 0.0


def cost_share(uses: list[CacheUse]) -> float:
    """Input cost against the same tokens uncached."""
    total = sum(u.total for u in uses)
    paid = sum(u.input + 0.1 * u.read + 1.25 * u.write_5m + 2.0 * u.write_1h for u in uses)
    return paid / total if total else 0.0


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    report = Report("cache_replay", "12. Prompt cache: a 30-turn DM at 0, 1 and 6 minutes a turn")
    prefix_noted = False
    for gap in PACES:
        for ttl in SETTINGS:
            measured = asyncio.run(replay(gap, ttl))
            if not prefix_noted:
                report.add(
                    "fixed prefix (tools and system prompt)",
                    measured.prefix_tokens,
                    "tokens",
                    target=4000,
                )
                prefix_noted = True
            chat = [u for turn in measured.turns[FROM_TURN - 1 :] for u in turn]
            pace = f"{gap / 60:g} min apart, ttl {ttl}"
            targets = {60.0: (90, 25), 360.0: (80, None)}.get(gap, (None, None))
            share_target = targets[0] if (gap == 60.0 or ttl == "auto") else None
            cost_target = targets[1] if ttl == "auto" else None
            report.add(
                f"{pace}: chat input read from the cache",
                100 * read_share(chat),
                "%",
                target=share_target,
                higher_is_better=True,
            )
            report.add(
                f"{pace}: chat input cost vs uncached",
                100 * cost_share(chat),
                "%",
                target=cost_target,
            )
            report.add(
                f"{pace}: compaction input read from the cache",
                100 * read_share(measured.compaction),
                "%",
            )
            everything = [u for turn in measured.turns for u in turn] + measured.compaction
            report.add(
                f"{pace}: all 30 turns and compaction, cost vs uncached",
                100 * cost_share(everything),
                "%",
            )
    report.note("tokens estimated as Perch does (4 characters a token, 1,600 an image)")
    report.save(args.json)


if __name__ == "__main__":
    main()
