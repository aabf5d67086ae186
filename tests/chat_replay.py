"""A DM replayed through Perch's own request building, on a clock the replay moves.

`ChatReplay(fake, tmp)` builds the daemon's object graph (`bot.build.build`, its one channel
an in-memory Telegram, `tests.fakes.chat.MemoryChannel`) with its config pointed at a `FakeAnthropic` (or a `FakeOpenAI`), and a virtual clock that
both the graph (the prompt's time, the prompt cache's pacing) and the fake's `PromptCache`
read. `say(text)` runs
one turn of a Telegram-like DM through the real `TurnRunner` (prompt, history pipeline,
tools, agent loop, Anthropic provider and its body encoder) and saves it as the daemon does;
`compact()` is `/compact`; `advance(seconds)` moves the clock. The tests of the prompt
cache's request bytes and `bench.cache_replay` both drive it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from bot.build import Parts, build
from bot.config.schema import Config
from bot.kernel.lanes import Pending, Turn
from bot.kernel.sessions import SessionKey
from bot.kernel.turn_outcome import TurnOutcome
from bot.kernel.workspace import seed_workspace
from bot.store.open import open_store
from bot.store.roles import Store
from channels.base import ChatRef, Image, Inbound
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import make_config
from tests.model_backends import provider_settings

START = 1_795_600_000.0  # a fixed moment, so replays are repeatable


class ChatReplay:
    """`async with ChatReplay(fake, tmp_path, overrides) as chat:` then `await chat.say(...)`."""

    def __init__(
        self,
        fake: FakeAnthropic | FakeOpenAI,
        root: Path,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        self.fake = fake
        self.root = root
        self.overrides = dict(overrides or {})
        self.now = START
        self.key = SessionKey.dm("main", "telegram", "default", "4242")
        self.chat = ChatRef("telegram", "default", "dm", "4242")
        self.channel = MemoryChannel("telegram", account="default")
        self.config: Config | None = None
        self.store: Store | None = None
        self.parts: Parts | None = None
        if isinstance(fake, FakeAnthropic):
            fake.clock = self.clock  # its prompt cache lives on the replay's time

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def workspace(self) -> Path:
        assert self.config is not None
        return self.config.workspace

    async def __aenter__(self) -> ChatReplay:
        model, providers = provider_settings(self.fake)
        settings = {"agent.model": model, "providers": providers, **self.overrides}
        self.config = make_config(self.root, self.fake.base_url, settings)
        seed_workspace(self.config.workspace)
        self.store = await open_store(self.config.store_target)
        channels = {"telegram": self.channel}
        self.parts = build(self.config, self.store, channels, "replay", clock=self.clock)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.parts is not None:
            await self.parts.upkeep.stop()
            await self.parts.client.aclose()
            await self.parts.index.aclose()
        if self.store is not None:
            await self.store.close()

    async def say(self, text: str, *, images: tuple[Image, ...] = ()) -> TurnOutcome:
        """One turn: the user's message in, the model's work and answer saved."""
        assert self.parts is not None
        inbound = Inbound(
            chat=self.chat,
            sender_id="4242",
            text=text,
            message_id=uuid.uuid4().hex,
            images=images,
            received_at=self.now,
        )
        turn = Turn([Pending(inbound, None)])
        return await self.parts.gateway.runner.run(self.key, turn, self.chat)

    async def compact(self) -> str:
        """`/compact`: the memory flush and the summary, as the command runs them."""
        assert self.parts is not None
        return await self.parts.upkeep.compact_now(self.key)
