"""The Telegram channel's settings (`channels.telegram` in config.yaml), checked when it loads.

Owns `TelegramOptions`: the config model the loader validates `channels.telegram` with and
the adapter runs on (no copy in between). When the channel is enabled it checks the token's
shape and the webhook settings, each error naming the key to fix; it derives the bot id and
the file URL.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import model_validator

from channels.options import ChannelPolicy, Secret

_TOKEN_RE = re.compile(r"^(\d+):[A-Za-z0-9_-]+$")
_WEBHOOK_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


class TelegramOptions(ChannelPolicy):
    """Settings of the Telegram channel (`channels.telegram` in config.yaml).

    `base_file_url` defaults to `base_url` with its trailing "/bot" turned into "/file/bot",
    which is right for api.telegram.org and for a local Bot API server alike. The tuning
    knobs below `webhook_port` rarely need changing; tests shorten them.
    """

    token: Secret = ""
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    webhook_secret: Secret = ""
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443
    stream_interval: float = 1.0
    typing_interval: float = 4.0
    poll_timeout: int = 30
    chunk_limit: int = 4000
    send_attempts: int = 5
    retry_backoff: float = 0.5
    reconnect_delay: float = 1.0

    @model_validator(mode="after")
    def _usable(self) -> TelegramOptions:
        if not self.enabled:
            return self
        if not self.token:
            raise ValueError(
                "channels.telegram.token is empty: create a bot with @BotFather and set "
                "TELEGRAM_BOT_TOKEN (or disable the channel)"
            )
        if not _TOKEN_RE.match(self.token):
            raise ValueError(
                "channels.telegram.token does not look like a bot token "
                "(expected '<digits>:<secret>' as @BotFather prints it)"
            )
        if self.mode == "webhook":
            if not self.webhook_url.startswith(("https://", "http://")):
                raise ValueError(
                    "channels.telegram.webhook_url must be the public https:// address Telegram "
                    "posts updates to when mode is 'webhook'"
                )
            if not _WEBHOOK_SECRET_RE.match(self.webhook_secret):
                raise ValueError(
                    "channels.telegram.webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, "
                    "_ or - when mode is 'webhook' (Telegram echoes it so forged posts are refused)"
                )
        if not 1 <= self.chunk_limit <= 4096:
            raise ValueError("channels.telegram.chunk_limit must be between 1 and 4096")
        if self.send_attempts < 1:
            raise ValueError("channels.telegram.send_attempts must be at least 1")
        return self

    @property
    def bot_id(self) -> int:
        return int(self.token.split(":", 1)[0])

    @property
    def file_url(self) -> str:
        if self.base_file_url:
            return self.base_file_url
        base = self.base_url.rstrip("/")
        if base.endswith("/bot"):
            return base[: -len("/bot")] + "/file/bot"
        return base + "/file/bot"
