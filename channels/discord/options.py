"""The Discord channel's settings (`channels.discord` in config.yaml), checked when it loads.

Owns `DiscordOptions`, the config model the adapter runs on. Every refusal names the
`channels.discord` key at fault and says what to put there.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, model_validator

from channels.options import ChannelPolicy, Secret

# Bot tokens are three base64url parts joined by dots (id, timestamp, HMAC).
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{10,}$")
_COMMAND = re.compile(r"^[a-z0-9_-]{1,32}$")
DEFAULT_SLASH_COMMANDS = ("stop", "stopall", "status", "model", "help")


class DiscordOptions(ChannelPolicy):
    """Configuration of the Discord channel (`channels.discord` in config.yaml).

    `allow_from` holds user ids and `groups` channel ids (a thread is let in when its
    parent channel is). `api_base` is where every REST call goes and where the gateway's
    address is asked for (`GET {api_base}/gateway/bot`). `auto_thread` answers a mention
    in a channel inside a new thread started from that message (one session per thread);
    off, the answer is a reply in the channel. `slash_commands` are registered as
    Discord slash commands at start (an empty list registers none and leaves the
    application's commands alone). The tuning knobs below rarely need changing; tests
    shorten them.
    """

    token: Secret = ""
    api_base: str = "https://discord.com/api/v10"
    auto_thread: bool = False
    slash_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_SLASH_COMMANDS))
    chunk_limit: Annotated[int, Field(ge=100, le=2000)] = 2000
    stream_interval: Annotated[float, Field(gt=0)] = 1.2  # Discord allows 5 edits per 5 s
    typing_interval: Annotated[float, Field(gt=0)] = 8.0  # the indicator lasts ~10 s
    connect_timeout: Annotated[float, Field(gt=0)] = 15.0
    guild_ready_timeout: Annotated[float, Field(ge=0)] = 2.0
    max_rate_limit_wait: Annotated[float, Field(ge=0)] = 60.0
    send_attempts: Annotated[int, Field(ge=1)] = 4
    retry_backoff: Annotated[float, Field(gt=0)] = 1.0
    interaction_timeout: Annotated[float, Field(gt=0)] = 30.0

    @model_validator(mode="after")
    def _usable(self) -> DiscordOptions:
        if not self.enabled:
            return self
        if not self.token:
            raise ValueError(
                "channels.discord.token is empty: create a bot in the Discord Developer Portal "
                "(Applications > Bot > Reset Token) and set DISCORD_BOT_TOKEN"
            )
        if self.token.lower().startswith("bot "):
            raise ValueError(
                "channels.discord.token starts with 'Bot '; give the token alone, Perch adds "
                "the prefix"
            )
        if not _TOKEN.match(self.token):
            raise ValueError(
                "channels.discord.token does not look like a bot token (three parts joined by "
                "dots, as the Developer Portal shows it); the client secret or public key "
                "will not work"
            )
        if not self.api_base.startswith(("https://", "http://")):
            raise ValueError(
                "channels.discord.api_base must be an http(s) URL such as "
                "https://discord.com/api/v10"
            )
        for name in self.slash_commands:
            if not _COMMAND.match(name):
                raise ValueError(
                    f"channels.discord.slash_commands: {name!r} is not a slash command name "
                    "(lower-case letters, digits, _ or -, at most 32; no leading /)"
                )
        return self

    @property
    def rest_base(self) -> str:
        return self.api_base.rstrip("/")
