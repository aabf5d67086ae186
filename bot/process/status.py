"""What the daemon says of itself: `DaemonStatus`, and the status file that keeps it.

`DaemonStatus.snapshot()` is what `perch status` shows, the control socket answers and the
instance row summarises. `write_status(path, status)` replaces the status file atomically;
`read_status(path)` returns what a daemon that still lives wrote there, else None (a file
left by a dead one is ignored), for commands that find no socket.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from bot.config.schema import Config
from channels.base import Channel

STANDBY = "standby: another instance receives on this channel"

log = logging.getLogger(__name__)


def write_status(path: Path, status: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # no SQLite file made it (PostgreSQL)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=1))
        tmp.replace(path)
    except OSError as exc:
        log.debug("could not write %s: %s", path, exc)


def read_status(path: Path) -> dict[str, Any] | None:
    """What the running daemon wrote to `path`, or None when none is running."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not pid_alive(int(data.get("pid", 0))):
        return None
    return data


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StatusSource(Protocol):
    def status(self) -> dict[str, Any]: ...


class Receivers(Protocol):
    leading: set[str]

    def standby(self, name: str) -> bool: ...


class DaemonStatus:
    """What the running daemon says of itself (`perch status`, the status file, the
    instance row): its process, model, channels (up, down or standby) and what its parts
    report (runs and queue, next heartbeat and cron run, MCP servers)."""

    def __init__(
        self,
        config: Config,
        channels: Mapping[str, Channel],
        receivers: Receivers,
        parts: Sequence[StatusSource],
    ) -> None:
        self.config = config
        self.channels = channels
        self.receivers = receivers
        self.parts = tuple(parts)
        self.started_at = time.time()

    def snapshot(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "updated_at": time.time(),
            "model": self.config.agent.model,
            "channels": {
                name: {"up": s.up, "detail": s.detail}
                if not self.receivers.standby(name)
                else {"up": False, "detail": STANDBY, "standby": True}
                for name, s in ((n, c.status()) for n, c in self.channels.items())
            },
            "leads": sorted(self.receivers.leading),
        }
        for part in self.parts:
            status.update(part.status())
        return status
