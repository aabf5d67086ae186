"""The ports: the few calls a wing makes into the hub, and the one road out to a chat.

A wing (cron, the heartbeat, the control socket, the message tool) never holds the Gateway or
the TurnRunner; `bot/build.py` hands it the hub through one of these instead:
- `SystemTurns`: run a turn the daemon starts itself, in the session's lane (the gateway
  implements it);
- `ChatCommands`: a chat command such as `/stop`, run for a session from outside a chat;
- `Outbox`: deliver a reply to a target: the running channels and the telemetry that counts
  each send, through the one delivery path (`delivery.send_reply`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from agents.prompt import PromptMode
from bot.kernel.delivery import ReplyKind, send_reply
from bot.kernel.sessions import SessionKey
from bot.kernel.turn_outcome import TurnOutcome
from bot.observe.telemetry import OFF, Telemetry
from channels.base import Channel, ChatRef

NOTHING_TO_STOP = "Nothing to stop."  # the answer of /stop and /stopall when nothing runs


class SystemTurns(Protocol):
    """Run a system turn: what cron, the heartbeat and `perch chat` ask of the hub."""

    @property
    def accepting(self) -> bool:
        """False once the daemon is stopping: no new turn starts."""
        ...

    def is_busy(self, key: SessionKey) -> bool: ...

    async def run_system_turn(
        self,
        key: SessionKey,
        text: str,
        *,
        chat: ChatRef | None = None,
        when_busy: Literal["skip", "queue"] = "skip",
        mode: PromptMode = "full",
        system: bool = True,
    ) -> TurnOutcome | None:
        """Run `text` as a turn of `key` (delivered to `chat` when given); None when the
        session was busy (`skip`), the turn was queued (`queue`) or the daemon is stopping."""
        ...


class ChatCommands(Protocol):
    """The chat commands: a stop from the shell or the dashboard is the chat's `/stop`,
    reaching runs here and on other instances alike."""

    async def handle(self, name: str, key: SessionKey) -> str: ...


@dataclass(frozen=True, slots=True)
class Outbox:
    """Deliver to a target: the running channels, each send counted by `telemetry`."""

    channels: Mapping[str, Channel]
    telemetry: Telemetry = OFF

    async def send(self, chat: ChatRef, text: str, *, kind: ReplyKind = "reply") -> str:
        """Clean `text` and send it to `chat`; returns what was sent ("" when the silent
        rules left nothing). Raises `DeliveryError` when the channel is down or refused."""
        return await send_reply(self.channels, chat, text, kind=kind, telemetry=self.telemetry)
