"""The WhatsApp plug-in as the registry sees it: options, factory, capabilities, doctor probe."""

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
from channels.whatsapp.options import WhatsAppOptions

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.whatsapp.adapter import WhatsAppChannel

    assert isinstance(options, WhatsAppOptions)
    return WhatsAppChannel(options, context.state_dir)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`GET {api_base}/{phone_number_id}`: the token works and names this business number."""
    assert isinstance(options, WhatsAppOptions)
    url = f"{options.api_base.rstrip('/')}/{options.phone_number_id}"
    headers = {"Authorization": f"Bearer {options.access_token}"}
    try:
        status, data = await probe_json(http, "GET", url, headers=headers)
    except ProbeUnreachable as exc:
        return ProbeResult(
            False, f"{options.api_base} unreachable ({exc})", "check channels.whatsapp.api_base"
        )
    if status != 200:
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        return ProbeResult(
            False,
            f"the Graph API refused the phone number id or token (HTTP {status}"
            f"{': ' + str(message)[:200] if message else ''})",
            "check channels.whatsapp.phone_number_id and a permanent system-user access_token",
        )
    number = data.get("display_phone_number") or "?"
    name = data.get("verified_name") or "?"
    return ProbeResult(True, f"business number {number} ({name})")


PLUGIN = ChannelPlugin(
    key="whatsapp",
    options=WhatsAppOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=False,
        can_type=True,
        can_react=True,
        max_upload_bytes=100_000_000,
        photos=True,
        max_len=4096,
        chat_hint="You are replying in WhatsApp. *Bold*, _italic_, ~strikethrough~, `code` and "
        "lists render; headings and tables do not, so write short paragraphs and lists.",
    ),
    probe=probe,
    # Graph access tokens (EAA...) in anything a library might log
    redact=(re.compile(r"\bEAA[A-Za-z0-9]{20,}"),),
)
