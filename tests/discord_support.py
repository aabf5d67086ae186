"""What the Discord channel tests share: options pointed at the fake, a
running channel, and the fence check."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from channels.base import ChatRef, Inbound
from channels.chunking import parse_fence
from channels.discord.adapter import DiscordChannel
from channels.discord.options import DiscordOptions
from tests.fakes import discord_payloads as p
from tests.fakes.chat import Inbox
from tests.fakes.discord import FakeDiscord

MESSAGES = "POST /channels/{channel_id}/messages"
EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"


def make_options(fake: FakeDiscord, **overrides: Any) -> DiscordOptions:
    values: dict[str, Any] = {
        "enabled": True,
        "token": p.TOKEN,
        "api_base": fake.api_base,
        "guild_ready_timeout": 0.05,
        "connect_timeout": 5.0,
        "stream_interval": 0.05,
        "typing_interval": 0.05,
        "retry_backoff": 0.05,
        "interaction_timeout": 5.0,
    }
    values.update(overrides)
    return DiscordOptions(**values)


@contextlib.asynccontextmanager
async def running(
    fake: FakeDiscord, handler: Callable[[Inbound], Any] | None = None, **overrides: Any
) -> AsyncIterator[tuple[DiscordChannel, Inbox]]:
    channel = DiscordChannel(make_options(fake, **overrides))
    box = Inbox()
    await channel.start(handler or box)
    try:
        yield channel, box
    finally:
        await channel.stop()


def channel_chat(reply_to: str | None = None, thread: str | None = None) -> ChatRef:
    return ChatRef("discord", p.BOT_ID, "group", p.CHANNEL_ID, thread, reply_to)


def fences_balanced(text: str) -> bool:
    fence = None
    for line in text.split("\n"):
        if fence is None:
            fence = parse_fence(line)
        elif fence.closes(line):
            fence = None
    return fence is None
