"""Keeping the Slack Socket Mode connection alive: noticing a cut quickly and reconnecting.

Owns the Socket Mode client's lifecycle after the first connection. slack_sdk's own monitor
looks at the socket once per `ping_interval` (10 s in Bolt), so a TCP connection dropped
without a close frame stayed unnoticed that long; here the adapter is the only one that
reconnects (the SDK's auto-reconnect is off): `keep_connected` looks every half second, and
a socket that went silent is closed by aiohttp's heartbeat when a pong is missing for half a
`ping_interval`. Reconnecting backs off through `channels.reconnect`. The SDK's tracebacks
are kept to one line each (`one_line_records`), and `close_socket_client` stops it boundedly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient

from channels.reconnect import Backoff, connect_until_up

log = logging.getLogger("channels.slack")

LIVENESS_CHECK = 0.5  # seconds between looks at the socket
RETRY_CEILING = 60.0
CONNECTED = "connected (socket mode)"


def take_over_reconnects(client: SocketModeClient) -> None:
    """Switch the SDK's own reconnects off: `keep_connected` does them, promptly."""
    client.default_auto_reconnect_enabled = False
    client.auto_reconnect_enabled = False


async def open_socket(client: SocketModeClient, timeout: float) -> None:
    """A fresh websocket URL, then a connection: errors surface (bounded by `timeout`)
    instead of being retried forever inside the SDK."""
    client.wss_uri = await client.issue_new_wss_url()
    client.last_ping_pong_time = None  # the old socket's pongs say nothing about the new one
    # Not wait_for: on Python 3.11 it swallows a cancel (our stop()) that comes as the
    # connection completes.
    async with asyncio.timeout(timeout):
        await client.connect()


async def keep_connected(
    client: SocketModeClient,
    *,
    ping_interval: float,
    connect_timeout: float,
    set_status: Callable[[bool, str], None],
    describe: Callable[[Exception], str],
) -> None:
    """Watch the socket; when it is gone, say so and reconnect with backoff. Runs until
    cancelled."""
    backoff = Backoff(min(1.0, ping_interval), RETRY_CEILING)
    every = min(LIVENESS_CHECK, ping_interval / 2)

    def failed(exc: Exception, delay: float) -> bool:
        set_status(False, f"{describe(exc)} in {delay:g}s")
        return True

    while True:
        await asyncio.sleep(every)
        if await client.is_connected():
            set_status(True, CONNECTED)
            continue
        set_status(False, "socket mode connection lost; reconnecting")
        await connect_until_up(
            lambda: open_socket(client, connect_timeout), backoff, on_failure=failed
        )
        set_status(True, CONNECTED)


class _OneLine(logging.Filter):
    """Keeps a record to its first line, without traceback: the SDK logs a full traceback
    for every failed connection attempt, and Slack's whole answer after a failed call."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "\n" in message:
            record.msg, record.args = message.split("\n", 1)[0].rstrip(), None
        if record.exc_info:
            record.exc_info = None
            record.exc_text = None
        return True


def one_line_records(logger: logging.Logger) -> logging.Logger:
    """`logger`, its records from now on without tracebacks (added once per logger)."""
    if not any(isinstance(f, _OneLine) for f in logger.filters):
        logger.addFilter(_OneLine())
    return logger


async def close_socket_client(socket: AsyncSocketModeHandler) -> None:
    """Close the SDK's Socket Mode client and wait for its background futures, boundedly."""
    client = socket.client
    client.auto_reconnect_enabled = False
    try:
        await asyncio.wait_for(socket.close_async(), 1.0)
    except Exception as exc:
        log.debug("slack: closing the socket client: %r", exc)
    futures = [
        future
        for future in (
            client.message_processor,
            client.current_session_monitor,
            client.message_receiver,
        )
        if future is not None and not future.done()
    ]
    for future in futures:
        future.cancel()
    if futures:
        await asyncio.wait(futures, timeout=1.0)
    if not client.aiohttp_client_session.closed:
        with contextlib.suppress(Exception):
            await client.aiohttp_client_session.close()
