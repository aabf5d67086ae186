"""The Slack channel's settings (`channels.slack` in config.yaml), checked when it loads.

Owns `SlackOptions`, the config model the adapter runs on. Every refusal names the
`channels.slack` key at fault and says what to put there.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import model_validator

from channels.options import ChannelPolicy, Secret


class SlackOptions(ChannelPolicy):
    """Configuration of the Slack channel (`channels.slack` in config.yaml).

    Beyond the documented keys: `ping_interval` is how often the Socket Mode client pings (a
    dropped connection is replaced within a second; one that goes silent, once a pong is
    missing for half this time);
    `connect_timeout` bounds how long `start()` waits for the first connection before it
    returns with status down and keeps trying in the background; `max_retries` bounds the
    retries of one Web API call on 429 and on connection errors.
    """

    bot_token: Secret = ""
    app_token: Secret = ""
    signing_secret: Secret = ""
    base_url: str = "https://slack.com/api/"
    mode: Literal["socket", "http"] = "socket"
    http_listen: str = "127.0.0.1"
    http_port: int = 3000
    slash_command: str = ""
    stream_interval: float = 1.0
    typing_interval: float = 4.0
    chunk_limit: int = 4000
    ping_interval: float = 5.0
    connect_timeout: float = 10.0
    max_retries: int = 5

    @model_validator(mode="after")
    def _usable(self) -> SlackOptions:
        if not self.enabled:
            return self
        if not self.bot_token:
            raise ValueError("channels.slack.bot_token is empty; set SLACK_BOT_TOKEN (xoxb-...)")
        if self.bot_token.startswith("xapp-"):
            raise ValueError(
                "channels.slack.bot_token holds an app-level token (xapp-); put the bot token "
                "(xoxb-...) there and the xapp- token in channels.slack.app_token"
            )
        if self.mode == "socket" and not self.app_token:
            raise ValueError(
                "channels.slack.app_token is empty but mode is socket; set SLACK_APP_TOKEN "
                "(xapp-..., with the connections:write scope) or use mode: http"
            )
        if self.mode == "socket" and self.app_token.startswith("xox"):
            raise ValueError(
                "channels.slack.app_token holds a bot/user token; Socket Mode needs the "
                "app-level token (xapp-...) from Basic Information > App-Level Tokens"
            )
        if self.mode == "http" and not self.signing_secret:
            raise ValueError(
                "channels.slack.signing_secret is empty but mode is http; set "
                "SLACK_SIGNING_SECRET (Basic Information > Signing Secret)"
            )
        if self.slash_command and not re.fullmatch(r"/[a-z0-9_\-]+", self.slash_command):
            raise ValueError(
                f"channels.slack.slash_command {self.slash_command!r} is not a slash command; "
                "write it like /perch, or leave it empty"
            )
        if self.ping_interval <= 0:
            raise ValueError("channels.slack.ping_interval must be a positive number of seconds")
        if self.chunk_limit < 100:
            raise ValueError("channels.slack.chunk_limit must be at least 100 characters")
        return self
