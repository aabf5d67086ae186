"""The gateway: every inbound message goes dedupe -> access -> commands -> lanes -> run.

`Gateway.on_message` is the handler every channel calls. It writes the message to the
inbox first (a redelivered platform id is dropped there), checks access, answers commands
without the model, and admits the rest into the session's `Lane`, starting turns as tasks.
A global semaphore (`max_concurrent_runs`) hands out model-run slots first come, first
served, given back when a turn's agent loop ends (before its answer is saved and sent). When
a turn ends its inbox rows are closed and the lane starts what waits. `start()` begins
taking sub-agent results (`Announcements`) as parent turns; crash recovery is
`bot/hub/recovery.py`'s, through `process`, `close` and `send`. Cron, the heartbeat and
`perch chat` reach it as `SystemTurns` (`bot/kernel/ports.py`), never as the Gateway.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Literal, Protocol

from agents.cancel import Cancelled
from agents.loop_events import EventSink
from agents.prompt import PromptMode
from bot.cluster.slots import SessionSlots
from bot.config.schema import Config
from bot.fleet.bindings import agent_for
from bot.hub.access import AccessControl, Verdict
from bot.hub.commands import (
    Approvals,
    BudgetGuard,
    Commands,
    RemoteControl,
    SessionReset,
    parse_command,
    unknown_command_reply,
)
from bot.hub.group_context import GroupContext
from bot.hub.inbox_payload import inbound_to_payload, well_formed, where
from bot.hub.lane_control import Compactor, LaneControls
from bot.hub.model_choice import ModelChoices
from bot.hub.subagent_host import Announcements
from bot.hub.turns import TurnRunner
from bot.kernel.lanes import Admission, Lane, LaneTable, Pending, QueueMode, Turn, take_run_slot
from bot.kernel.sessions import SessionKey
from bot.kernel.turn_outcome import TurnOutcome
from bot.media.chat import ChatMedia
from bot.observe.telemetry import OFF, Telemetry
from bot.store.roles import Claims, History, Inbox, Sessions, UsageLedger
from channels.base import Channel, ChatRef, Inbound, Outbound

log = logging.getLogger(__name__)

DROPPED_NOTICE = (
    "I was busy and had to drop older waiting messages; please resend anything still important."
)
RESTART_NOTICE = "I'm restarting and had to stop this reply; please ask again in a minute."


class GatewayStore(Inbox, Claims, Sessions, History, UsageLedger, Protocol):
    """The inbox, the run slots across instances, and what chat commands read."""


class Gateway(LaneControls):
    def __init__(
        self,
        config: Config,
        store: GatewayStore,
        runner: TurnRunner,
        channels: Mapping[str, Channel],
        access: AccessControl,
        models: ModelChoices,
        *,
        budget: BudgetGuard | None = None,
        remote: RemoteControl | None = None,
        compactor: Compactor | None = None,
        cancel_children: Callable[[str], int] = lambda _session: 0,
        announcements: Announcements | None = None,
        media: ChatMedia | None = None,  # acknowledged, steered and settled attachments
        telemetry: Telemetry = OFF,  # the daemon's own notices are counted sends
        window: int = 200_000,  # the model's context window: how full a session's context is
        on_new: Sequence[SessionReset] = (),  # told of /new and /reset (the browser forgets)
        approvals: Approvals | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.runner = runner
        self.channels = channels
        self.media, self.telemetry, self.window = media, telemetry, window
        self.access = access
        self.commands = Commands(
            self,
            store,
            config,
            models,
            budget=budget,
            remote=remote,
            on_new=on_new,
            approvals=approvals,
        )
        self.approvals = approvals
        agent = config.agent
        self.lanes = LaneTable(group_limit=agent.group_max_concurrent, cap=agent.queue.cap)
        self.slots = asyncio.Semaphore(config.agent.max_concurrent_runs)
        self.session_slots = SessionSlots(store)
        self.mode: QueueMode = config.agent.queue.mode
        self.accepting = True
        self.compactor = compactor
        self.cancel_children = cancel_children  # a session's sub-agents outliving their turn
        # A one-line notice while chats may not spend (bot/kernel/budget.py), else "".
        self.budget_gate = budget.notice if budget is not None and budget.enabled else None
        self.announcements = announcements
        self._announcing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self.group_context = GroupContext(config.gateway.group_context_messages)
        self._idle = asyncio.Event()
        self._idle.set()

    def start(self) -> None:
        """Take sub-agent results as parent turns from now until `drain()`."""
        if self.announcements is not None:
            self._announcing = asyncio.create_task(self._announce_forever(self.announcements))

    async def _announce_forever(self, source: Announcements) -> None:
        while True:  # until drain() cancels it; a stopping gateway runs no new turn
            batch = await source.next()
            turn = self.run_system_turn(
                batch.parent, batch.text, chat=batch.chat, when_busy="queue"
            )
            self._spawn(turn)

    # -- intake -------------------------------------------------------------------------

    async def on_message(self, inbound: Inbound) -> None:
        if inbound.choice is not None:  # a tap on a card: the approver's answer, not a message
            if self.approvals is not None:
                await self.approvals.on_choice(inbound)
            return
        inbound = well_formed(inbound)
        key = SessionKey.for_chat(self.agent_for(inbound.chat), inbound.chat)
        chat, payload = inbound.chat, inbound_to_payload(inbound)
        inbox_id = await self.store.inbox_add(
            chat.channel, chat.account, chat.chat_id, inbound.message_id, payload, str(key)
        )
        if inbox_id is None:
            log.info("duplicate message %s from %s dropped", inbound.message_id, where(inbound))
            return
        if not self.accepting:
            # Shutting down: the message stays open in the inbox and runs after the restart.
            log.info("shutting down: %s kept for the next start", where(inbound))
            return
        await self.process(inbound, key, inbox_id)

    def agent_for(self, chat: ChatRef) -> str:
        """The agent that answers in `chat` (`bindings:`, bot/fleet/bindings.py)."""
        return agent_for(self.config.bindings, self.config.agent.id, chat)

    async def process(self, inbound: Inbound, key: SessionKey, inbox_id: int | None) -> None:
        """Access, commands, lanes for a message already in the inbox (row `inbox_id`)."""
        command = parse_command(inbound.text)
        if command is not None:
            await self.close([inbox_id], "command")
            if not await self.access.is_authorised(inbound):
                log.info("command /%s from unauthorised %s ignored", command, where(inbound))
                return
            reply = await self.commands.handle(command, key, inbound)
            await self.send(inbound.chat, reply, urgent=True)
            return
        access = await self.access.check(inbound)
        if access.verdict is Verdict.CONTEXT:
            who = inbound.sender_name or inbound.sender_id
            self.group_context.remember(str(key.chat_key), who, inbound.text)
            await self.close([inbox_id], "context")
            return
        if access.verdict is Verdict.PAIRING:
            await self.close([inbox_id], "pairing")
            await self.send(inbound.chat, access.reply)
            return
        if access.verdict is Verdict.DENY:
            log.info("message from %s ignored: %s", where(inbound), access.reason)
            await self.close([inbox_id], "denied")
            return
        notice = unknown_command_reply(inbound.text)
        if not notice and self.budget_gate is not None:
            notice = await self.budget_gate()
        if notice:
            await self.close([inbox_id], "answered")
            await self.send(inbound.chat, notice)
            return
        pending = Pending(inbound, inbox_id, self.group_context.take(str(key.chat_key)))
        if self.media is not None:
            self.media.acknowledge(inbound)
        lane = self._lane(key)
        self._apply(key, lane, pending, lane.admit(pending, self.mode))

    def _apply(self, key: SessionKey, lane: Lane, pending: Pending, admission: Admission) -> None:
        for turn in admission.interrupt:
            turn.cancel.cancel("interrupted by a newer message")
        if admission.dropped:
            # One notice per busy spell, however many messages a flood pushes out.
            notify = not lane.drop_noticed
            lane.drop_noticed = True
            self._spawn(self._drop(pending.inbound.chat, list(admission.dropped), notify))
        if admission.steer_into is not None:
            turn = admission.steer_into
            turn.steered.append(pending)
            if pending.inbound.attachments and self.media is not None:
                self._spawn(self.media.steer(turn, pending))  # voice/files made text first
                return
            turn.steer_with(pending.inbound.text)
            return
        if admission.start:
            self._start(key, lane, [pending])

    def _start(self, key: SessionKey, lane: Lane, items: list[Pending]) -> None:
        turn = Turn(items)
        lane.active.append(turn)
        self._idle.clear()
        self._spawn(self._run(key, lane, turn), name=f"turn-{turn.run_id}")

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
    ) -> TurnOutcome | None:
        """Run a turn the daemon starts itself (heartbeat, cron, sub-agent result) in the
        session's lane, so `/stop` reaches it and a DM never runs two turns at once. With
        `chat` the reply is delivered there; without, the caller gets the outcome. A busy
        session makes it return None at once (`skip`) or wait in the queue (`queue`). `run_id`
        names the run when it starts at once (a webhook's answer gave it already); `watch`
        is told of its progress (text as it is written) when it starts at once."""
        if not self.accepting:
            return None
        inbound = Inbound(
            chat=chat or ChatRef("", "", "dm", str(key)),
            sender_id="system",
            text=text,
            message_id=uuid.uuid4().hex,
            sender_name="system",
        )
        pending = Pending(inbound, None, system=system)  # False: the owner's `perch chat`
        lane = self._lane(key)
        if not lane.idle or not lane.has_room:
            if when_busy == "queue":
                self._apply(key, lane, pending, lane.admit(pending, "followup"))
            else:
                self.lanes.forget_if_idle(lane)
            return None
        turn = Turn([pending], watch=watch)
        turn.run_id = run_id or turn.run_id
        lane.active.append(turn)
        self._idle.clear()
        return await self._run(key, lane, turn, mode)

    async def _run(
        self, key: SessionKey, lane: Lane, turn: Turn, mode: PromptMode = "full"
    ) -> TurnOutcome | None:
        status = "done"
        chat = turn.items[-1].reply_chat
        answered: set[int] = set()  # inbox rows closed as soon as the reply was out
        try:
            held = None
            try:  # across instances first (a shared store), then this instance's cap
                held = await self.session_slots.take(str(key), lane.limit, turn.cancel)
                await take_run_slot(turn, self.slots)
            except Cancelled:
                status = "skipped"
                await self.session_slots.give_back(held)
                return None
            turn.answered = lambda: self._answered(turn, answered)
            try:
                outcome = await self.runner.run(key, turn, chat, mode)
                if (state := outcome.session) is not None:  # a full context runs one at a time
                    self.lanes.note_context(state.key, state.context_tokens / self.window)
                return outcome
            finally:
                turn.release_slot()
                await self.session_slots.give_back(held)
        except Exception:
            status = "failed"
            log.exception("turn %s for %s failed", turn.run_id, key)
            if chat is not None:
                await self.send(chat, "Sorry, something went wrong on my side; please try again.")
            return None
        finally:
            lane.active.remove(turn)
            await self._release((*turn.items, *turn.steered), status, closed=answered)
            if self.accepting:
                for batch in lane.next_batches(self.mode):
                    self._start(key, lane, batch)
            self.lanes.forget_if_idle(lane)
            if not self.lanes.any_active():
                self._idle.set()

    # -- shutdown ---------------------------------------------------------------------------

    async def drain(self, grace: float) -> int:
        """Stop intake, let running turns finish for `grace` seconds, cancel the rest.

        Returns how many turns had to be cancelled. Queued messages stay open in the inbox
        so the next start re-runs them.
        """
        self.accepting = False
        if self._announcing is not None:
            self._announcing.cancel()
        for lane in self.lanes.values():
            lane.queue.clear()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=grace)
            return 0
        except TimeoutError:
            pass
        cancelled = 0
        for lane in list(self.lanes.values()):
            for turn in lane.active:
                if not turn.cancel.cancelled:
                    turn.cancel.cancel("the service is restarting")
                    cancelled += 1
                    chat = turn.items[-1].reply_chat
                    if chat is not None:
                        self._spawn(self.send(chat, RESTART_NOTICE))
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=5)
        except TimeoutError:
            log.warning("some turns did not end within 5 s of being cancelled")
        await self.wait_background(2)
        return cancelled

    async def wait_idle(self) -> None:
        """Until no turn is running or waiting anywhere."""
        await self._idle.wait()

    async def wait_background(self, timeout: float) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def status(self) -> dict[str, Any]:
        return self.lanes.status()

    # -- internals -------------------------------------------------------------------------

    def _lane(self, key: SessionKey) -> Lane:
        return self.lanes.open(str(key), is_group=key.root.is_group)

    async def _drop(self, chat: ChatRef, dropped: list[Pending], notify: bool) -> None:
        await self._release(dropped, "dropped")
        log.warning("queue full for %s: dropped %d oldest message(s)", chat.chat_id, len(dropped))
        if notify:
            await self.send(chat, DROPPED_NOTICE)

    async def send(self, chat: ChatRef, text: str, *, urgent: bool = False) -> None:
        """A notice of the daemon's own (not model output): sent as written, errors logged."""
        channel = self.channels.get(chat.channel)
        if channel is None:
            log.error("cannot reply on %s: channel not running", chat.channel)
            return
        try:
            with self.telemetry.send(chat.channel):  # counted, and a span of a turn's
                await channel.send(Outbound(chat, text, urgent=urgent))
        except Exception as exc:
            log.error("sending to %s on %s failed: %s", chat.chat_id, chat.channel, exc)

    async def close(self, ids: Iterable[int | None], status: str) -> None:
        """Finish inbox rows (None: a message that had none)."""
        await self.store.inbox_close([i for i in ids if i is not None], status)

    async def _answered(self, turn: Turn, closed: set[int]) -> None:
        """The turn's reply is out: its messages are done now, not after what follows (their
        rows join `closed`, which the turn's end leaves alone)."""
        ids = {p.inbox_id for p in (*turn.items, *turn.steered) if p.inbox_id is not None}
        try:
            await self.close(ids, "done")
        except Exception as exc:  # closed again (or taken over) when the turn ends
            log.warning("could not mark turn %s answered: %s", turn.run_id, exc)
        else:
            closed |= ids

    async def _release(
        self, items: Iterable[Pending], status: str, closed: AbstractSet[int] = frozenset()
    ) -> None:
        """Close accepted messages' inbox rows, but those already `closed`, however their turn
        went (answered, stopped, failed, dropped); take their acknowledgement reactions off."""
        items = list(items)
        await self.close([p.inbox_id for p in items if p.inbox_id not in closed], status)
        if self.media is not None:
            await self.media.settle(p.inbound for p in items)

    def _spawn(self, coro: Coroutine[Any, Any, object], name: str | None = None) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
