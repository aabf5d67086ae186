"""Where discord.py sends its requests: the one place that points the library at `api_base`.

discord.py has no constructor argument for its REST base or its gateway address: every REST
route is built from the class attribute `discord.http.Route.BASE` (webhooks and interaction
responses included), and the gateway is opened at `DiscordWebSocket.DEFAULT_GATEWAY`
whenever it does not resume (first connect, after an invalidated session). Both are set
here and nowhere else. They are process-wide, which suits the daemon: one Discord account
per process. The gateway address is not configured but discovered, as Discord asks bots to
do, with `GET {api_base}/gateway/bot` before each connect (`use_gateway`).
"""

from __future__ import annotations

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route


def use_api_base(api_base: str) -> None:
    """Every REST call of the library goes to `api_base` (e.g. https://discord.com/api/v10)."""
    Route.BASE = api_base.rstrip("/")


def use_gateway(url: str) -> None:
    """New gateway sessions open at `url` (what `GET /gateway/bot` answered)."""
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
