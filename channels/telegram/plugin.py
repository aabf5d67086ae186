"""The Telegram plug-in as the registry sees it: options, factory, capabilities, doctor probe."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from channels.base import Channel
from channels.options import ChannelOptions
from channels.plugin import (
    Capabilities,
    ChannelContext,
    ChannelPlugin,
    ProbeResult,
    ProbeUnreachable,
    probe_json,
)
from channels.telegram.options import TelegramOptions

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.telegram.adapter import TelegramChannel

    assert isinstance(options, TelegramOptions)
    return TelegramChannel(options)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`getMe` with the configured token."""
    assert isinstance(options, TelegramOptions)
    url = f"{options.base_url.rstrip('/')}{options.token}/getMe"
    try:
        status, data = await probe_json(http, "GET", url)
    except ProbeUnreachable as exc:
        return ProbeResult(
            False,
            f"Bot API unreachable ({exc})",
            "check channels.telegram.base_url and the network",
        )
    result = data.get("result")
    if data.get("ok") and isinstance(result, dict):
        return ProbeResult(True, f"bot @{result.get('username')} is reachable")
    return ProbeResult(
        False,
        f"getMe failed: {data.get('description', status)}",
        "check TELEGRAM_BOT_TOKEN (from @BotFather)",
    )


PLUGIN = ChannelPlugin(
    key="telegram",
    options=TelegramOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=True,
        can_type=True,
        can_react=True,
        max_upload_bytes=50_000_000,
        photos=True,
        voice_caption_chars=1024,
        max_len=4096,
        length_unit="utf16",
        chat_hint="You are replying in Telegram. Markdown works (bold, italic, code, links); "
        "tables do not render, so use lists instead.",
    ),
    probe=probe,
    redact=(re.compile(r"(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}"),),  # a bot token
    quiet_loggers=("telegram",),
    # long polling: Telegram answers one getUpdates at a time per bot; a webhook runs anywhere
    single_receiver=lambda options: getattr(options, "mode", "polling") == "polling",
)
