"""Chat commands that never reach the model: /stop, /stopall, /new, /reset, /status, /model,
/compact, /budget, /skills, /approve, /deny, /help.

`parse_command(text)` recognises `/cmd` and `/cmd@botname` (any case) at the start of a
message. `Commands.handle(name, key, inbound)` acts through the small `SessionControl`
protocol the gateway implements, and returns the reply text (DESIGN section 3, step 3).
`unknown_command_reply(text)` answers any other `/word` (from a sender who is let in) with
the list of commands, on every platform, instead of sending it to the model.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agents.model import Usage
from agents.pricing import usage_summary
from bot.config.schema import Config
from bot.hub.model_choice import ModelChoices
from bot.kernel.ports import NOTHING_TO_STOP
from bot.kernel.sessions import SessionKey
from bot.store.roles import History, Sessions, UsageLedger
from bot.tools.skills import chat_listing, skill_catalog
from channels.base import Inbound

log = logging.getLogger(__name__)

# Told the session key when /new or /reset starts a session afresh (state kept per session
# outside the store, such as the browser's context, is dropped).
SessionReset = Callable[[str], Awaitable[None]]


class CommandStore(Sessions, History, UsageLedger, Protocol):
    """What chat commands read and change: sessions, their size, today's spend."""


COMMANDS = (
    "stop",
    "stopall",
    "new",
    "reset",
    "status",
    "help",
    "compact",
    "model",
    "budget",
    "skills",
    "approve",
    "deny",
)
_COMMAND = re.compile(r"^/([A-Za-z]+)(?:@[A-Za-z0-9_]+)?(?:\s|$)")

HELP = """\
Commands:
/stop - stop the oldest reply in progress here (waiting messages still run)
/stopall - stop every reply in progress here and drop waiting messages
/new - start a fresh conversation (the old one is archived)
/reset - clear this conversation's history
/compact - summarise the conversation now to free context
/status - model, usage and what is running
/model - list models; /model <provider>/<model> switches this chat, /model default resets
/budget - today's spend against the daily budget (/budget lift: owner only)
/skills - the skills I can use, and those that are missing something
/approve <id> [always], /deny <id> - answer an approval request (the approver only)
/help - this list"""


def parse_command(text: str) -> str | None:
    """The command name if `text` is one of ours, else None."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    return name if name in COMMANDS else None


def unknown_command_reply(text: str) -> str:
    """The answer to a `/word` that is not one of ours, or "" for any other text."""
    match = _COMMAND.match(text.strip())
    if match is None or match.group(1).lower() in COMMANDS:
        return ""
    return f"Unknown command /{match.group(1)}.\n{HELP}"


class ApprovalAnswers(Protocol):
    """`/approve <id> [always]` and `/deny <id>` (`bot.approvals.broker.ApprovalBroker`)."""

    async def command(self, name: str, argument: str, inbound: Inbound) -> str: ...


class Approvals(ApprovalAnswers, Protocol):
    """Answers to approval requests: typed commands and taps on cards (the gateway's)."""

    async def on_choice(self, inbound: Inbound) -> None: ...


class BudgetControl(Protocol):
    async def command(self, argument: str, *, is_owner: bool) -> str: ...


class BudgetGuard(BudgetControl, Protocol):
    """The daily spending guard as the gateway sees it (`bot.kernel.budget.Budget`)."""

    @property
    def enabled(self) -> bool: ...

    async def notice(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LaneInfo:
    active: int
    queued: int


class SessionControl(Protocol):
    def stop_oldest(self, key: SessionKey) -> bool: ...

    def stop_all(self, key: SessionKey) -> tuple[int, int]: ...

    def lane_info(self, key: SessionKey) -> LaneInfo: ...

    async def compact_now(self, key: SessionKey) -> str: ...


class RemoteControl(Protocol):
    """Stops runs on other instances sharing the store (`bot.cluster.stops.StopRequests`)."""

    async def stop(self, key: str, *, everything: bool) -> int: ...


class Commands:
    def __init__(
        self,
        control: SessionControl,
        store: CommandStore,
        config: Config,
        models: ModelChoices,
        *,
        budget: BudgetControl | None = None,
        remote: RemoteControl | None = None,  # when instances share the store
        on_new: Sequence[SessionReset] = (),  # told of /new and /reset (the browser forgets)
        approvals: ApprovalAnswers | None = None,
    ) -> None:
        self._control = control
        self._store = store
        self._config = config
        self.models = models
        self.budget = budget
        self.remote = remote
        self._on_new = tuple(on_new)
        self.approvals = approvals

    async def _remote(self, key: SessionKey, *, everything: bool) -> int:
        if self.remote is None:
            return 0
        return await self.remote.stop(str(key), everything=everything)

    async def _forget(self, key: SessionKey) -> None:
        for forget in self._on_new:
            try:
                await forget(str(key))
            except Exception:
                log.exception("forgetting the session's state on /new failed")

    async def handle(self, name: str, key: SessionKey, inbound: Inbound | None = None) -> str:
        text = inbound.text if inbound is not None else ""
        if name == "stop":
            if self._control.stop_oldest(key) or await self._remote(key, everything=False):
                return "Stopped."
            return NOTHING_TO_STOP
        if name == "stopall":
            runs, _dropped = self._control.stop_all(key)
            runs += await self._remote(key, everything=True)
            if runs == 0 and _dropped == 0:
                return NOTHING_TO_STOP
            return f"Stopped {runs} run{'s' if runs != 1 else ''}."
        if name == "new":
            self._control.stop_all(key)
            await self._remote(key, everything=True)
            await self._store.archive_session(str(key))
            await self._forget(key)
            return "Started a new conversation. The previous one is archived."
        if name == "reset":
            self._control.stop_all(key)
            await self._remote(key, everything=True)
            await self._store.reset_session(str(key))
            await self._forget(key)
            return "Cleared this conversation's history."
        if name == "compact":
            return await self._control.compact_now(key)
        if name == "status":
            return await self._status(key)
        if name == "model":
            argument = text.strip().partition(" ")[2]
            return await self.models.command(str(key), argument)
        if name in ("approve", "deny"):
            if self.approvals is None or inbound is None:
                return "There is nothing to approve here."
            return await self.approvals.command(name, text.strip().partition(" ")[2], inbound)
        if name == "skills":  # read from disk as the next turn will see them
            return chat_listing(skill_catalog(self._config).skills())
        if name == "budget":
            if self.budget is None:
                return "There is no daily budget (agent.budget.daily_usd is 0)."
            argument = text.strip().partition(" ")[2]
            return await self.budget.command(argument, is_owner=self._is_owner(inbound))
        return HELP

    def _is_owner(self, inbound: Inbound | None) -> bool:
        """A DM from one of the channel's owner ids (allow_from without "*"; the console
        user)."""
        if inbound is None or inbound.chat.is_group:
            return False
        options = self._config.channels.options(inbound.chat.channel)
        return options is not None and inbound.sender_id in options.owner_ids()

    async def _status(self, key: SessionKey) -> str:
        session = await self._store.find_session(str(key))
        info = self._control.lane_info(key)
        day_start = time.time() - (time.time() % 86400)
        today = await self._store.usage_since(day_start)
        current = await self.models.current(str(key))
        chosen = " (chosen with /model)" if await self.models.chosen(str(key)) else ""
        lines = [f"Agent: {key.agent}", f"Model: {current}{chosen}"]
        if session is not None and session.model and session.model != current:
            lines.append(f"Last answer from: {session.model} (fallback)")
        if session is not None:
            count = await self._store.count_messages(session.id)
            spent = Usage(
                session.input_tokens,
                session.output_tokens,
                session.cache_read_tokens,
                session.cache_write_tokens,
                session.cost_usd,
            )
            lines.append(
                f"This conversation: {count} messages, {usage_summary(spent)}"
                + (f", compacted {session.compactions}x" if session.compactions else "")
            )
            if session.context_tokens:
                lines.append(f"Context: about {session.context_tokens} tokens")
        else:
            lines.append("This conversation: empty")
        lines.append(f"Running: {info.active}, waiting: {info.queued}")
        lines.append(f"All chats today (UTC): ${today.cost_usd:.4f}")
        return "\n".join(lines)
