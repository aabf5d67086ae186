"""The Matrix plug-in as the registry sees it: options, factory, capabilities, doctor probe.

The probe asks `GET /_matrix/client/v3/account/whoami` with the access token. With a password
instead it only checks that the homeserver answers `GET /_matrix/client/versions`: logging in
to check would make a new device each time, so the password is tried when the channel starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from channels.base import Channel
from channels.matrix.options import MatrixOptions
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

WHOAMI = "/_matrix/client/v3/account/whoami"
VERSIONS = "/_matrix/client/versions"


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.matrix.adapter import MatrixChannel

    assert isinstance(options, MatrixOptions)
    return MatrixChannel(options, (context.state_dir or Path("data")) / "matrix")


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """`GET /account/whoami` with the access token (a password: the homeserver answering)."""
    assert isinstance(options, MatrixOptions)
    unreachable = "check channels.matrix.homeserver and the network"
    if not options.access_token:
        try:
            status, data = await probe_json(http, "GET", options.api_base + VERSIONS)
        except ProbeUnreachable as exc:
            return ProbeResult(False, f"homeserver unreachable ({exc})", unreachable)
        if status == 200 and data.get("versions"):
            return ProbeResult(
                True, f"homeserver {options.api_base} answers; the password is tried at start"
            )
        return ProbeResult(False, f"GET {VERSIONS} failed: HTTP {status}", unreachable)
    headers = {"Authorization": f"Bearer {options.access_token}"}
    try:
        status, data = await probe_json(http, "GET", options.api_base + WHOAMI, headers=headers)
    except ProbeUnreachable as exc:
        return ProbeResult(False, f"homeserver unreachable ({exc})", unreachable)
    user = data.get("user_id")
    if status == 200 and user:
        if user != options.user_id:
            return ProbeResult(
                False,
                f"the access token is {user}'s, not {options.user_id}'s",
                "set channels.matrix.user_id to the token's user, or use that user's token",
            )
        device = data.get("device_id") or "no device"
        return ProbeResult(True, f"{user} (device {device}) is reachable")
    reason = str(data.get("errcode") or "")
    return ProbeResult(
        False,
        f"GET {WHOAMI} failed: HTTP {status} {reason}".rstrip(),
        "check MATRIX_ACCESS_TOKEN (Element: Settings > Help & About > Access Token)",
    )


PLUGIN = ChannelPlugin(
    key="matrix",
    options=MatrixOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=True,
        can_type=True,
        can_react=True,
        max_upload_bytes=50 * 1024 * 1024,
        photos=True,
        max_len=4000,
        length_unit="chars",
        chat_hint="You are replying in Matrix (Element and other clients). Markdown works: "
        "bold, italic, ~~strike~~, code, code blocks, > quotes, headings, lists, links; "
        "tables render as code blocks. Keep replies compact.",
    ),
    probe=probe,
    # Synapse's access tokens (syt_<user>_<random>_<crc>) and other servers' long opaque ones
    redact=(re.compile(r"\bsy[tr]_[A-Za-z0-9_-]{10,}"), re.compile(r"\bmct_[A-Za-z0-9_-]{10,}")),
    quiet_loggers=("nio", "peewee"),
    # one /sync stream per device: two instances would both answer every message
    single_receiver=lambda options: True,
)
