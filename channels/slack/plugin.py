"""The Slack plug-in as the registry sees it: options, factory, capabilities, doctor probe."""

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
from channels.slack.options import SlackOptions

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.slack.adapter import SlackChannel

    assert isinstance(options, SlackOptions)
    return SlackChannel(options)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`auth.test` with the bot token."""
    assert isinstance(options, SlackOptions)
    url = options.base_url.rstrip("/") + "/auth.test"
    headers = {"Authorization": f"Bearer {options.bot_token}"}
    try:
        status, data = await probe_json(http, "POST", url, headers=headers)
    except ProbeUnreachable as exc:
        return ProbeResult(
            False, f"Slack API unreachable ({exc})", "check channels.slack.base_url and the network"
        )
    if data.get("ok"):
        return ProbeResult(True, f"bot {data.get('user')} in team {data.get('team')} is ready")
    return ProbeResult(
        False, f"auth.test failed: {data.get('error', status)}", "check SLACK_BOT_TOKEN (xoxb-...)"
    )


PLUGIN = ChannelPlugin(
    key="slack",
    options=SlackOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=True,
        can_type=True,
        can_react=True,
        max_upload_bytes=1_000_000_000,
        max_len=40_000,
        length_unit="chars",
        chat_hint="You are replying in Slack. Markdown is converted to Slack formatting; keep "
        "replies compact.",
    ),
    probe=probe,
    redact=(
        re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{8,}"),  # bot and user tokens
        re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"),  # app-level tokens
    ),
    quiet_loggers=("slack_bolt", "slack_sdk"),
)
