"""One turn of one session, from accepted messages to a delivered (or silent) reply.

`TurnRunner.run(key, turn, chat)` loads the session, builds the user message (text, images,
group context, collected follow-ups), applies the input guard, prepares history (summary
pair, turn limit, pruning, pairing repair), runs the agent loop while showing typing and a
streamed preview, persists the run's messages in one transaction, and hands the final text
to `bot.kernel.delivery.TurnReply` (the one delivery path: clean -> NO_REPLY -> render -> chunk ->
send; the preview shows only cleaned text too). A cancelled run is saved too (its history
is valid by construction); its preview is left showing the cleaned partial text. Each turn
runs inside `telemetry.turn(...)` (metrics, the root span of its trace), and its log lines
carry its run id, session and trace id.

The user message opens with the prompt's turn context (`PromptBuilder.turn_context`: the
time), so it is stored with it and the system prompt stays the same from turn to turn; what
recall found for the message follows the time (`bot/recall/turn_recall.py`) and is taken
out again before the save; the run is indexed right after it is saved (`SearchIndex`). The
session's `CachePolicy` gives the run its prompt-cache plan. What the request starts from
(the session, its history, the prompt's session facts) is `bot/hub/turn_inputs.py`'s. A run
the model API refused for good is saved marked and left out of later histories, and the user
is told why (`bot/hub/rejected.py`).
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack

from agents.cache_policy import CachePolicy
from agents.guard import BLOCKED_REPLY, check_input
from agents.history import estimate_tokens
from agents.loop import AgentLoop, RunRequest, RunResult
from agents.model import Block, Message, TextBlock, image_block, text_block
from agents.pricing import context_window
from agents.prompt import PromptBuilder, PromptMode
from agents.surrogates import fix_text
from agents.tools.base import ToolContext, ToolRegistry
from bot.config.schema import Config
from bot.hub.model_choice import ModelChoices
from bot.hub.rejected import rejected_reply, rejection_mark
from bot.hub.turn_inputs import TurnStore, chat_history, load_session
from bot.kernel.delivery import TurnReply, cut_long_texts
from bot.kernel.lanes import Pending, Turn
from bot.kernel.people import People, owners_of, private_entries
from bot.kernel.routing import encode_chat
from bot.kernel.session_facts import runtime_info
from bot.kernel.sessions import SessionKey
from bot.kernel.turn_outcome import SessionState, TurnOutcome, empty_answer
from bot.kernel.typing_later import typing_later
from bot.media.chat import ChatMedia
from bot.observe.labels import NO_CHANNEL
from bot.observe.telemetry import OFF, Telemetry
from bot.process.logs import run_id_var, session_var, trace_id_var
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from channels.base import Channel, ChatRef, Outbound

log = logging.getLogger(__name__)


ERROR_REPLY = "Sorry, I couldn't answer that: {error}"
EMPTY_REPLY = (
    "The model sent back an empty answer, so there is nothing to show. Please send your "
    "message again, or rephrase it."
)


SessionListener = Callable[[SessionState], Awaitable[None]]


class TurnRunner:
    """Runs turns for the main agent. Shared by every session; holds no per-turn state."""

    def __init__(
        self,
        config: Config,
        store: TurnStore,
        loop: AgentLoop,
        prompts: PromptBuilder,
        tools: ToolRegistry,
        channels: Mapping[str, Channel],
        *,
        media: ChatMedia | None = None,  # attachments in, files and reactions out
        models: ModelChoices | None = None,  # /model choices; None: always agent.model
        after_run: Sequence[SessionListener] = (),  # told of each finished model run
        telemetry: Telemetry = OFF,  # metrics and traces of each turn
        cache: CachePolicy | None = None,  # the prompt cache's life per session
        recall: TurnRecall | None = None,  # what the index holds about each new message
        index: SearchIndex | None = None,  # told of each saved run
        agents: Mapping[str, TurnRunner] | None = None,  # the other agents' runners, by id
        people: People | None = None,  # whom each turn acts for (None: from the config)
    ) -> None:
        self.config = config
        self.store = store
        self.loop = loop
        self.prompts = prompts
        self.tools = tools
        self.channels = channels
        self.window = config.agent.context_window or context_window(config.agent.model)
        self.workspace = config.workspace  # resolved once: `Config.workspace` stats the disk
        self.media = media
        self.models = models
        self.after_run = tuple(after_run)
        self.telemetry = telemetry
        self.cache = cache or CachePolicy(config.agent.cache.ttl)
        self.recall = recall
        self.index = index
        self.agents: Mapping[str, TurnRunner] = agents or {}
        self.people = people or People(owners_of(config.channels.all()))

    async def run(
        self, key: SessionKey, turn: Turn, chat: ChatRef | None, mode: PromptMode = "full"
    ) -> TurnOutcome:
        """Run `turn`; with `chat`, stream to it and deliver there, else only return. A
        session of another agent (`agents:`) runs in that agent's runner."""
        other = self.agents.get(key.agent) if key.agent != self.config.agent.id else None
        if other is not None:
            return await other.run(key, turn, chat, mode)
        return await self._observed(key, turn, chat, self._run(key, turn, chat, mode))

    async def _run(
        self, key: SessionKey, turn: Turn, chat: ChatRef | None, mode: PromptMode
    ) -> TurnOutcome:
        channel = self.channels.get(chat.channel) if chat is not None else None
        if chat is not None and channel is None:
            log.error("no channel %r for session %s", chat.channel, key)
            return TurnOutcome(None, False)
        items = turn.items
        if self.media is not None:
            items, notices = await self.media.prepare(turn.items)
            if channel is not None and chat is not None:
                for notice in notices:
                    with self.telemetry.send(chat.channel):
                        await channel.send(Outbound(chat, notice))
            if not items:
                return TurnOutcome(None, bool(notices) and channel is not None)
        text, images = _user_text(key, items)
        # Transcripts and extracted file text come from outside too (NUL: the guard's).
        text = fix_text(text, keep_nul=True)
        user_content: list[Block] = [*images, text_block(text)]
        if not all(item.system for item in turn.items):
            guard = self.config.agent.guard
            verdict = check_input(text, mode=guard.mode, max_chars=guard.max_message_chars)
            if verdict.blocked:
                if channel is not None and chat is not None:
                    with self.telemetry.send(chat.channel):
                        await channel.send(Outbound(chat, BLOCKED_REPLY))
                return TurnOutcome(None, channel is not None, blocked=True)
            user_content = [*images, text_block(verdict.text)]
        if self.media is None:
            return await self.run_content(key, turn, chat, user_content, channel=channel, mode=mode)
        last = items[-1]
        self.media.begin(turn.run_id, None if last.system else last.inbound)
        try:
            return await self.run_content(key, turn, chat, user_content, channel=channel, mode=mode)
        finally:
            self.media.end(turn.run_id)

    async def _observed(
        self, key: SessionKey, turn: Turn, chat: ChatRef | None, work: Awaitable[TurnOutcome]
    ) -> TurnOutcome:
        """`work` (the turn) run with its log context (run id, session, trace id), inside
        the turn's telemetry."""
        run_token = run_id_var.set(turn.run_id)
        session_token = session_var.set(str(key))
        channel = chat.channel if chat is not None and chat.channel else NO_CHANNEL
        try:
            with self.telemetry.turn(channel, key.kind, turn.run_id) as probe:
                trace_token = trace_id_var.set(probe.trace_id)
                try:
                    outcome = await work
                finally:
                    trace_id_var.reset(trace_token)
                probe.finished(turn_outcome(outcome))
                return outcome
        finally:
            run_id_var.reset(run_token)
            session_var.reset(session_token)

    async def run_content(
        self,
        key: SessionKey,
        turn: Turn,
        chat: ChatRef | None,
        user_content: list[Block],
        *,
        channel: Channel | None = None,
        mode: PromptMode = "full",
        origin: str | None = None,
    ) -> TurnOutcome:
        """Run a turn whose user message is already built (`run` observes it)."""
        turns = self.config.agent.history_turns
        session, stored, total = await load_session(self.store, str(key), turns)
        self.telemetry.conversation(session.id)
        history = chat_history(self.config, session.summary, stored, self.window)
        chosen = await self.models.chosen(str(key)) if self.models is not None else ""
        channel_name = chat.channel if chat is not None else None
        runtime = runtime_info(self.config, key, channel_name, chosen or self.config.agent.model)
        recalled: list[TextBlock] = []
        if self.recall is not None and mode == "full":
            words = "\n".join(b["text"] for b in user_content if b["type"] == "text")
            recalled = await self.recall.blocks(key, session.id, words, history, _requester(turn))
        request = RunRequest(
            session_key=str(key),
            system=self.prompts.build(mode, runtime),
            history=history,
            user_content=[*self.prompts.turn_context(runtime), *recalled, *user_content],
            tools=self.tools,
            context=ToolContext(
                workspace=self.workspace,
                session_key=str(key),
                private=private_entries(await self.people.person(str(key), _requester(turn))),
                cancel=turn.cancel,
                origin=origin if origin is not None else _origin(chat),
                depth=key.depth,
                run_id=turn.run_id,
                model=chosen or None,
                requester=_requester(turn),
                pause=turn.pause,
            ),
            cancel=turn.cancel,
            steer=turn.steer,
            model=chosen or None,
            cache=self.cache.plan(str(key)),
        )
        started = time.perf_counter()
        async with AsyncExitStack() as stack:
            reply: TurnReply | None = None
            if channel is not None and chat is not None:
                typing_after = self.config.gateway.typing_after
                await stack.enter_async_context(typing_later(channel, chat, typing_after))
                after = self.config.gateway.preview_after
                voice = self.media.spoken_reply(turn.run_id, channel, chat) if self.media else None
                reply = TurnReply(channel, chat, self.telemetry, after, voice)
                stack.callback(reply.close)
            try:
                result = await self.loop.run(request, reply.on_event if reply else turn.watch)
            finally:
                self.cache.ended(str(key))
                turn.release_slot()  # the model work is over: the next turn may start it
            saved = cut_long_texts(_without(result.new_messages, recalled))
            refused = rejection_mark(result.rejected) if result.rejected is not None else ""
            await self.store.save_run(
                session.id,
                str(key),
                saved,
                usage=result.usage,
                run_id=turn.run_id,
                model=result.model,
                context_tokens=result.context_tokens or None,
                origin=request.context.origin or None,
                rejected=refused,
            )
            if refused:
                log.warning("the model API refused the run for good (%s): left out", refused)
                saved = []  # kept in the store, marked: neither indexed nor counted
            delivered = await _deliver(result, reply)
            unanswered = not delivered and _asked_in_a_dm(key, turn)
            if reply is not None and unanswered and empty_answer(result):
                # Silence here reads as a hung daemon (not NO_REPLY, a chosen one): say so.
                log.warning("model %s sent back an empty answer in %s", result.model, key)
                with self.telemetry.send(reply.chat.channel):
                    await reply.channel.send(Outbound(reply.chat, EMPTY_REPLY))
                delivered = True
            if result.status != "cancelled":
                await turn.answered()  # saved and sent: no other instance may run it again
        if self.index is not None and saved:
            await self.index.index_run(key, session.id, saved)
        log.info(
            "turn %s in %.2fs by %s, %d iterations, %d+%d tokens, $%.4f",
            result.status,
            time.perf_counter() - started,
            result.model,
            result.iterations,
            result.usage.input_tokens,
            result.usage.output_tokens,
            result.usage.cost_usd,
        )
        kept = [] if refused else result.new_messages
        state = SessionState(
            str(key),
            total + len(kept),
            result.context_tokens or estimate_tokens([*history, *kept]),
            result.usage.cost_usd,
            mode,
            runtime,
        )
        for listener in self.after_run:
            await listener(state)
        return TurnOutcome(result, delivered, session=state)


def turn_outcome(outcome: TurnOutcome) -> str:
    """How a turn ended, as metrics count it: the run's status, `blocked` by the input guard,
    or `skipped` (no model run: nothing left after media, or no channel for the chat)."""
    if outcome.blocked:
        return "blocked"
    return outcome.result.status if outcome.result is not None else "skipped"


def _asked_in_a_dm(key: SessionKey, turn: Turn) -> bool:
    """A person wrote in a DM (not a group, where the model may keep quiet, and not only
    system items such as a cron job's prompt)."""
    return not key.root.is_group and not all(item.system for item in turn.items)


async def _deliver(result: RunResult, reply: TurnReply | None) -> bool:
    """Hand the run's outcome to the delivery path; True if a reply was sent."""
    if reply is None:
        return False
    if result.status == "cancelled":
        await reply.cancel()
        return False
    if result.rejected is not None:
        await reply.fail(rejected_reply(result.rejected, result.new_messages))
        return True
    if result.status == "error":
        await reply.fail(ERROR_REPLY.format(error=result.error))
        return True
    return await reply.finish(result.text)


def _user_text(key: SessionKey, items: list[Pending]) -> tuple[str, list[Block]]:
    images: list[Block] = []
    lines: list[str] = []
    group = key.root.is_group
    for item in items:
        inbound = item.inbound
        for image in inbound.images:
            images.append(
                image_block(image.media_type, base64.b64encode(image.data).decode("ascii"))
            )
        text = inbound.text
        if item.system:
            text = f"[System message]\n{text}"
        elif group:
            who = inbound.sender_name or inbound.sender_id
            text = f"[{who}]: {text}"
        if item.context:
            text = f"[Recent messages in this chat, for context]\n{item.context}\n\n{text}"
        lines.append(text)
    if len(lines) == 1:
        return lines[0], images
    header = f"[{len(lines)} messages arrived while you were busy; answer them together]"
    return header + "\n\n" + "\n\n".join(lines), images


def _without(messages: list[Message], blocks: list[TextBlock]) -> list[Message]:
    """The run's messages with `blocks` (recall's, by identity) taken out of its first."""
    if not blocks or not messages:
        return messages
    ids = {id(b) for b in blocks}
    first = messages[0]
    kept = [b for b in first["content"] if id(b) not in ids]
    return [{"role": first["role"], "content": kept}, *messages[1:]]


def _requester(turn: Turn) -> str | None:
    """Who sent the turn's latest message (None: the daemon's own turn)."""
    people = [item.inbound.sender_id for item in turn.items if not item.system]
    return people[-1] if people else None


def _origin(chat: ChatRef | None) -> str | None:
    return encode_chat(chat) if chat is not None else None
