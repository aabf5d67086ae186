"""What a control operation returns and what it works with.

A `Reply` is a command's rendered text plus its exit code, the same whether the running
daemon answered over its socket or the CLI did the work itself. `OpContext` is what an
operation gets: the config, the store, and (`live`) the running daemon when it is the one
answering.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from bot.config.schema import Config
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command prints: `out` on stdout, `err` on stderr, and its exit code."""

    code: int = 0
    out: str = ""
    err: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Reply:
        code = data.get("code", 1) if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(code, int):
            return cls(1, err="perch: the daemon sent an answer I cannot read\n")
        return cls(code, str(data.get("out", "")), str(data.get("err", "")))


class LiveDaemon(Protocol):
    """What the operations need from a running daemon (`bot/operator/control_server.py`)."""

    def status(self) -> dict[str, Any]: ...

    async def sync_cron(self) -> None: ...

    async def chat(self, text: str, session: str | None) -> Reply: ...

    async def send(self, to: str, text: str) -> Reply: ...

    def budget_line(self, spent: float) -> str: ...

    async def settle_index(self) -> None:
        """Write the runs the agents' search indexes keep waiting (`bot/recall/pending.py`),
        so an operation's search of the store sees them."""

    async def stop(self, key: SessionKey, *, everything: bool) -> Reply:
        """`/stop` (or `/stopall`) for `key`, as the chat command does it."""


@dataclass(slots=True)
class OpContext:
    config: Config
    store: Store
    live: LiveDaemon | None = None


Op = Callable[[OpContext, dict[str, Any]], Awaitable[Reply]]
