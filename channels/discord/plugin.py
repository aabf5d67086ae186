"""The Discord plug-in as the registry sees it: options, factory, capabilities, doctor probe."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from channels.base import Channel
from channels.discord.options import DiscordOptions
from channels.options import ChannelOptions
from channels.plugin import (
    Capabilities,
    ChannelContext,
    ChannelPlugin,
    ProbeResult,
    ProbeUnreachable,
    probe_json,
)

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.discord.adapter import DiscordChannel

    assert isinstance(options, DiscordOptions)
    return DiscordChannel(options)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`GET /users/@me` with the bot token."""
    assert isinstance(options, DiscordOptions)
    url = f"{options.rest_base}/users/@me"
    headers = {"Authorization": f"Bot {options.token}"}
    try:
        status, data = await probe_json(http, "GET", url, headers=headers)
    except ProbeUnreachable as exc:
        return ProbeResult(
            False,
            f"Discord API unreachable ({exc})",
            "check channels.discord.api_base and the network",
        )
    if status == 200 and data.get("id"):
        kind = "bot" if data.get("bot") else "user (not a bot token?)"
        return ProbeResult(True, f"{kind} {data.get('username')} ({data.get('id')}) is reachable")
    return ProbeResult(
        False,
        f"GET /users/@me failed: HTTP {status} {data.get('message', '')}".rstrip(),
        "check DISCORD_BOT_TOKEN (Developer Portal > Bot > Reset Token)",
    )


PLUGIN = ChannelPlugin(
    key="discord",
    options=DiscordOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=True,
        can_type=True,
        can_react=True,
        max_upload_bytes=10 * 1024 * 1024,
        photos=False,
        max_len=2000,
        length_unit="utf16",
        chat_hint="You are replying in Discord. Markdown works (bold, italic, ~~strike~~, code, "
        "code blocks, > quotes, # headings, lists, [masked links](https://...)), plus "
        "||spoilers|| and '-# ' for a line of small print; tables do not render, so use "
        "lists (or a code block) instead. Keep replies compact.",
    ),
    probe=probe,
    redact=(re.compile(r"\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}"),),
    quiet_loggers=("discord",),
    # one gateway session per token: two instances would both receive every message
    single_receiver=lambda options: True,
)
