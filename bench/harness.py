"""Perch in the measuring process, wired to the fakes of `bench.wire`.

`telegram_daemon(wire, ...)` writes a config.yaml (Telegram on against the fake Bot API, the
model against the fake Anthropic server, DMs open, one allowed group), starts the real
`Daemon` with logging set up as `perch run` sets it up (into /dev/null, so formatting and
redaction are still paid for), yields it, and stops it. `wait_idle` waits until no turn runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from bench.wire import Wire
from bot.config.schema import Config, GatewayConfig
from bot.daemon import Daemon
from bot.process.logs import setup_logging
from channels.telegram.flood import FloodControl
from tests.harness import make_config

SHIPPED = GatewayConfig()  # the gateway's settings as a config without `gateway:` has them

GROUP_CHAT = -1001234


@asynccontextmanager
async def telegram_daemon(
    wire: Wire,
    *,
    streaming: str = "partial",
    overrides: dict[str, Any] | None = None,
    paced: bool = False,
) -> AsyncIterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
        config = make_config(
            Path(tmp),
            wire.anthropic_url,
            {
                "channels.telegram.enabled": True,
                "channels.telegram.token": wire.token,
                "channels.telegram.base_url": wire.telegram_url,
                "channels.telegram.dm_policy": "open",
                "channels.telegram.allow_from": ["*"],
                "channels.telegram.groups": [str(GROUP_CHAT)],
                "channels.telegram.streaming": streaming,
                # as shipped (the tests' harness previews and shows typing at once)
                "gateway.preview_after": f"{SHIPPED.preview_after}s",
                "gateway.typing_after": f"{SHIPPED.typing_after}s",
                **(overrides or {}),
            },
        )
        pacing = contextlib.nullcontext() if paced else unpaced()
        with log_to_devnull(config, [wire.token, "test-key"]), pacing:
            daemon = Daemon(config)
            await daemon.start()
            daemon.freeze_startup_objects()  # as `perch run` does (Daemon.run)
            try:
                up = daemon.channels["telegram"].status()
                if not up.up:
                    raise RuntimeError(f"the Telegram channel did not come up: {up.detail}")
                yield daemon
            finally:
                await daemon.stop()


@contextmanager
def unpaced() -> Iterator[None]:
    """Lift the adapter's pacing to Telegram's 30 calls a second across chats: the fake Bot
    API has no such limit, and with it any burst measures the pacing (2 calls a turn: 15
    turns/s), not Perch."""
    defaults = FloodControl.__init__.__kwdefaults__
    assert defaults is not None and "per_second" in defaults
    saved = defaults["per_second"]
    defaults["per_second"] = 0  # no overall pace (a huge one kept a slot per call: the soak's RSS)
    try:
        yield
    finally:
        defaults["per_second"] = saved


@contextmanager
def log_to_devnull(config: Config, secrets: list[str]) -> Iterator[None]:
    """Logging as `perch run` sets it up, with the stream going to /dev/null."""
    setup_logging(config.logging.level, config.logging.format, secrets)
    root = logging.getLogger()
    with open(os.devnull, "w") as sink:
        for handler in root.handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sink)
        try:
            yield
        finally:
            root.handlers.clear()


async def wait_idle(daemon: Daemon, timeout: float = 60) -> None:
    """Wait until no turn is running or queued anywhere in the daemon."""
    assert daemon.gateway is not None
    await asyncio.wait_for(daemon.gateway.wait_idle(), timeout)
