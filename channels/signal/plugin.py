"""The Signal plug-in as the registry sees it: options, factory, capabilities, doctor probe."""

from __future__ import annotations

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
from channels.signal.options import SignalOptions

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.signal.adapter import SignalChannel

    assert isinstance(options, SignalOptions)
    return SignalChannel(options)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`/v1/about` of signal-cli-rest-api, which must run in json-rpc mode."""
    assert isinstance(options, SignalOptions)
    url = options.service_url.rstrip("/") + "/v1/about"
    try:
        _, data = await probe_json(http, "GET", url)
    except ProbeUnreachable as exc:
        return ProbeResult(
            False,
            f"{options.service_url} unreachable ({exc})",
            "start signal-cli-rest-api and check channels.signal.service_url",
        )
    mode = data.get("mode")
    if mode != "json-rpc":
        return ProbeResult(
            False,
            f"signal-cli-rest-api runs in mode {mode!r}",
            "run the container with MODE=json-rpc",
        )
    return ProbeResult(True, f"signal-cli-rest-api {data.get('version', '?')} in json-rpc mode")


PLUGIN = ChannelPlugin(
    key="signal",
    options=SignalOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=False,
        can_type=True,
        can_react=True,
        max_upload_bytes=100_000_000,
        voice_caption_chars=2000,  # the attachment's text; longer ones become a text file
        max_len=4000,
        length_unit="utf16",
        chat_hint="You are replying in Signal. Bold, italic, strikethrough and monospace render; "
        "links and tables show as plain text.",
    ),
    probe=probe,
    single_receiver=lambda options: True,  # one receive socket per account
)
