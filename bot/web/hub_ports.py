"""What the webhooks and the OpenAI-compatible API need of the daemon: to run a turn.

`SystemTurns` is the part of the gateway they use (`bot.hub.gateway.Gateway` implements it):
run a turn in a session's lane (so `/stop` and the lanes' rules hold for it), and stop
every run of a session (a cancelled API request). `read_body` reads a request's raw body
within a limit, without aiohttp's app-wide `client_max_size` (the dashboard keeps its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from aiohttp import web

from agents.loop_events import EventSink
from agents.prompt import PromptMode
from bot.kernel.sessions import SessionKey
from channels.base import ChatRef

if TYPE_CHECKING:  # the turn's outcome, a type only: the web wing never calls the core
    from bot.hub.turns import TurnOutcome


class SystemTurns(Protocol):
    async def run_system_turn(
        self,
        key: SessionKey,
        text: str,
        *,
        chat: ChatRef | None = None,
        when_busy: Literal["skip", "queue"] = "skip",
        mode: PromptMode = "full",
        system: bool = True,
        run_id: str | None = None,
        watch: EventSink | None = None,
    ) -> TurnOutcome | None: ...

    def stop_all(self, key: SessionKey) -> tuple[int, int]: ...


class TooLarge(Exception):
    """The body is longer than its limit (answered 413)."""


async def read_body(request: web.Request, limit: int) -> bytes:
    """The raw body, at most `limit` bytes; TooLarge past it."""
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge
    body = bytearray()
    while chunk := await request.content.read(65536):
        body += chunk
        if len(body) > limit:
            raise TooLarge
    return bytes(body)
