"""Talking to systemd: `sd_notify` (READY, STATUS, STOPPING) and the watchdog's keep-alive.

Both do nothing when the daemon does not run under systemd (no NOTIFY_SOCKET/WATCHDOG_USEC).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

log = logging.getLogger(__name__)


def sd_notify(message: str) -> bool:
    """Send a systemd notification if NOTIFY_SOCKET is set; a no-op otherwise."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError as exc:
        log.debug("sd_notify failed: %s", exc)
        return False


async def watchdog() -> None:
    usec = os.environ.get("WATCHDOG_USEC")
    if not usec:
        return
    interval = max(int(usec) / 1_000_000 / 2, 0.5)
    while True:
        sd_notify("WATCHDOG=1")
        await asyncio.sleep(interval)
