"""The approval broker: asks the approver, waits for the answer, keeps the audit.

`ApprovalBroker.ask(request, cancel)` is the agents' `Approver` port. It answers at once when
"always in this chat" was given for the same command (`agent.approvals.remember`), else it
records a pending request in the store, sends it to the approver's DM (a card with buttons
where the channel is a `ChoiceSender`, else a text naming `/approve <id>` and `/deny <id>`),
and waits: for a decision (`answer`, from a tap through `on_choice` or a typed command
through `command`), for `agent.approvals.timeout` (a denial), or for the turn's cancel token
(`/stop`, `/stopall`: the request is closed as stopped). The wait holds nothing of the
daemon's: the gate gives the turn's run slot back while it lasts (`ToolContext.pause`).

Only the approver counts: a decision is taken from `<channel>:<sender>` equal to the row's
`approver`, checked against the stored row, and the first decision wins (the store closes a
request once), so with a shared store a tap that reaches another instance decides too; the
waiting instance reads it from the store every `SHARED_POLL_S`. `start()` denies what an
earlier daemon left pending (status `restart`) and tells each approver so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.approval import ApprovalAnswer, ApprovalRequest
from agents.cancel import CancelToken
from bot.approvals.approver import ApproverDM, approver_dm
from bot.approvals.cards import (
    ALWAYS,
    APPROVE,
    DENY,
    TypedAnswer,
    buttons,
    decided_text,
    new_approval_id,
    outcome_line,
    read_command,
    request_text,
    where_text,
)
from bot.config.schema import Config
from bot.kernel.routing import decode_chat
from bot.store.roles import Approvals, Instances
from bot.store.rows import ApprovalRow, ApprovalStatus
from channels.base import Channel, ChatRef, ChoiceCard, ChoiceSender, Inbound, Outbound

log = logging.getLogger(__name__)

SHARED_POLL_S = 1.0  # how often a waiting request looks for a decision made elsewhere
RESTART_REASON = "the daemon restarted before an answer"


class ApprovalStore(Approvals, Instances, Protocol):
    """The audit, and which instances are alive (whose pending requests are still real)."""

    shared: bool


@dataclass(slots=True)
class _Waiting:
    row: ApprovalRow
    request: ApprovalRequest
    approver: ApproverDM
    text: str
    decided: asyncio.Future[ApprovalRow] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    message_id: str = ""  # the card's, on a channel with buttons


class ApprovalBroker:
    """See the module docstring. One per daemon; safe for concurrent turns."""

    def __init__(
        self,
        config: Config,
        store: ApprovalStore,
        channels: Mapping[str, Channel],
        instance_id: str,
    ) -> None:
        self.settings = config.agent.approvals
        self._config = config
        self._store = store
        self._channels = channels
        self._instance = instance_id
        self._waiting: dict[str, _Waiting] = {}
        self._remembered: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[object]] = set()

    # -- the port ---------------------------------------------------------------------------

    async def ask(self, request: ApprovalRequest, cancel: CancelToken) -> ApprovalAnswer:
        place = request.origin or request.session_key
        chat = decode_chat(request.origin or "")
        approver = approver_dm(
            self._config, self._channels, chat, request.requester, self.settings.approver
        )
        if approver is None:
            return ApprovalAnswer(False, "nobody can approve it (no owner in allow_from)")
        row = ApprovalRow(
            id=new_approval_id(),
            created_at=time.time(),
            session_key=request.session_key,
            origin=request.origin or "",
            tool=request.tool,
            summary=request.summary,
            requester=f"{chat.channel}:{request.requester}" if chat and request.requester else "",
            approver=approver.name,
            instance=self._instance,
        )
        if self.settings.remember and (place, request.remember_key) in self._remembered:
            row.status, row.decided_at, row.remembered = "approved", row.created_at, True
            row.reason = "always allowed in this chat"
            await self._store.approval_add(row)  # in the audit too, decided at once
            return ApprovalAnswer(True, row.reason)
        await self._store.approval_add(row)
        waiting = self._prepare(row, request, approver, chat)
        self._waiting[row.id] = waiting
        try:
            if not await self._post(waiting):
                decided = await self._close(
                    waiting, "denied", "", "the approver could not be reached"
                )
            else:
                decided = await self._wait(waiting)
        except asyncio.CancelledError:  # /stop, /stopall, shutdown: closed in the background
            self._spawn(self._close(waiting, "cancelled", "", cancel.reason or "stopped"))
            raise
        finally:
            self._waiting.pop(row.id, None)
        await self._settle(waiting, decided)
        if decided.status == "approved":
            if decided.remembered and self.settings.remember:
                self._remembered.add((place, request.remember_key))
            return ApprovalAnswer(True)
        return ApprovalAnswer(False, _reason(decided, self.settings.timeout))

    def _prepare(
        self, row: ApprovalRow, request: ApprovalRequest, approver: ApproverDM, chat: ChatRef | None
    ) -> _Waiting:
        channel = self._channels.get(approver.chat.channel)
        typed = not isinstance(channel, ChoiceSender)
        where = where_text(_chat_name(chat, request.session_key), request.requester)
        text = request_text(
            row.id,
            request,
            where,
            self.settings.timeout,
            typed=typed,
            remember=self.settings.remember,
        )
        return _Waiting(row, request, approver, text)

    async def _post(self, waiting: _Waiting) -> bool:
        """Send the request; False if the approver's channel refused it."""
        chat = waiting.approver.chat
        channel = self._channels.get(chat.channel)
        try:
            if isinstance(channel, ChoiceSender):
                card = ChoiceCard(
                    chat, waiting.row.id, waiting.text, buttons(self.settings.remember)
                )
                waiting.message_id = await channel.send_choice(card)
            elif channel is not None:
                await channel.send(Outbound(chat, waiting.text, urgent=True))
            else:
                return False
        except Exception as exc:
            log.error(
                "approval %s: could not ask %s: %s", waiting.row.id, waiting.approver.name, exc
            )
            return False
        log.info(
            "approval %s asked of %s: %s",
            waiting.row.id,
            waiting.approver.name,
            waiting.request.tool,
        )
        return True

    async def _wait(self, waiting: _Waiting) -> ApprovalRow:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.timeout
        while (remaining := deadline - loop.time()) > 0:
            step = min(remaining, SHARED_POLL_S) if self._store.shared else remaining
            try:
                return await asyncio.wait_for(asyncio.shield(waiting.decided), step)
            except TimeoutError:
                if self._store.shared:  # decided on another instance?
                    row = await self._store.approval_get(waiting.row.id)
                    if row is not None and row.status != "pending":
                        return row
        return await self._close(waiting, "timeout", "", "no answer in time")

    async def _close(
        self, waiting: _Waiting, status: ApprovalStatus, by: str, reason: str
    ) -> ApprovalRow:
        """Decide as the daemon (timeout, stop, unreachable); if an answer came first, that."""
        row_id = waiting.row.id
        decided = await self._store.approval_decide(row_id, status, by, reason)
        if decided is None:
            decided = await self._store.approval_get(row_id) or waiting.row
        if status == "cancelled":
            await self._settle(waiting, decided)
        return decided

    async def _settle(self, waiting: _Waiting, decided: ApprovalRow) -> None:
        """Show the decision where the request was shown (the card edited, or a line)."""
        chat = waiting.approver.chat
        channel = self._channels.get(chat.channel)
        try:
            if waiting.message_id and isinstance(channel, ChoiceSender):
                await channel.settle_choice(
                    chat, waiting.message_id, decided_text(waiting.text, decided)
                )
            elif channel is not None and decided.status in ("timeout", "cancelled"):
                await channel.send(
                    Outbound(chat, f"Approval {decided.id}: {outcome_line(decided)}")
                )
        except Exception as exc:
            log.warning("approval %s: could not show the decision: %s", decided.id, exc)

    # -- answers ----------------------------------------------------------------------------

    async def answer(self, typed: TypedAnswer, chat: ChatRef, sender: str) -> str:
        """A decision from `sender` in `chat`; the reply for them."""
        row = await self._store.approval_get(typed.approval_id)
        if row is None:
            return f"There is no approval request {typed.approval_id}."
        who = f"{chat.channel}:{sender}"
        if who != row.approver:
            log.warning(
                "approval %s: %s is not the approver (%s); refused", row.id, who, row.approver
            )
            return "Only the approver can answer this request."
        if row.status != "pending":
            return f"Approval {row.id} was answered already: {outcome_line(row)}"
        if not self._store.shared and row.id not in self._waiting:  # being closed right now
            return f"Approval {row.id} is no longer waiting for an answer."
        status: ApprovalStatus = "approved" if typed.approve else "denied"
        remembered = typed.always and self.settings.remember
        decided = await self._store.approval_decide(row.id, status, who, "", remembered=remembered)
        if decided is None:
            again = await self._store.approval_get(row.id)
            return f"Approval {row.id} was answered already: {outcome_line(again or row)}"
        waiting = self._waiting.get(row.id)
        if waiting is not None and not waiting.decided.done():
            waiting.decided.set_result(decided)
        log.info("approval %s %s by %s", row.id, status, who)
        return outcome_line(decided)

    async def command(self, name: str, argument: str, inbound: Inbound) -> str:
        """`/approve <id> [always]` or `/deny <id>`: the reply."""
        typed = read_command(name, argument)
        if isinstance(typed, str):
            return typed
        return await self.answer(typed, inbound.chat, inbound.sender_id)

    async def on_choice(self, inbound: Inbound) -> None:
        """A tap on a card's button: decided if the tapper is the approver; the tap answered."""
        choice = inbound.choice
        channel = self._channels.get(inbound.chat.channel)
        if choice is None or not isinstance(channel, ChoiceSender):
            return
        if choice.value in (APPROVE, ALWAYS, DENY):
            typed = TypedAnswer(choice.card_id, choice.value != DENY, choice.value == ALWAYS)
            note = await self.answer(typed, inbound.chat, inbound.sender_id)
        else:
            note = "That button is not one of mine."
        try:
            await channel.answer_choice(inbound.chat, choice, note)
        except Exception as exc:
            log.warning("could not answer a tap on %s: %s", inbound.chat.channel, exc)

    # -- restarts ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Deny what a daemon that is gone left pending, and tell each approver so."""
        keep = [self._instance]
        if self._store.shared:
            keep += [i.id for i in await self._store.instances(time.time() - 120)]
        for row in await self._store.approvals_abandon(keep, RESTART_REASON):
            log.warning("approval %s (%s) denied: %s", row.id, row.tool, RESTART_REASON)
            self._spawn(self._tell_restart(row))

    async def _tell_restart(self, row: ApprovalRow) -> None:
        channel_name, _, person = row.approver.partition(":")
        channel = self._channels.get(channel_name)
        if channel is None:
            return
        chat = ChatRef(channel_name, channel.account, "dm", person)
        text = (
            f"I restarted while approval {row.id} was waiting, so it was denied and did not "
            f"run:\n{row.summary}\nAsk me again if it is still needed."
        )
        try:
            await channel.send(Outbound(chat, text))
        except Exception as exc:
            log.warning(
                "approval %s: could not tell %s of the restart: %s", row.id, row.approver, exc
            )

    def pending(self) -> int:
        return len(self._waiting)

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _chat_name(chat: ChatRef | None, session_key: str) -> str:
    if chat is None:
        return f"a run of the daemon's own ({session_key})"
    if chat.kind == "dm":
        return f"a DM on {chat.channel}"
    return f"the group {chat.chat_id} on {chat.channel}"


def _reason(row: ApprovalRow, timeout: float) -> str:
    if row.status == "timeout":
        return f"no answer within {timeout:g} seconds"
    if row.status == "denied" and row.decided_by:
        return f"{row.decided_by.partition(':')[2]} said no"
    return row.reason or row.status
