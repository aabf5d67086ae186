"""Session upkeep: when and how a stored conversation is compacted.

`SessionUpkeep.after_run(session)` is called when a turn has been saved; if the session is
due (DESIGN section 4: over 50 messages or 75% of the context window) it compacts it in the
background, at most once at a time per session, so two concurrent group runs never compact
one session twice. The compaction waits until the chat has been quiet for `quiet` seconds
(1 s: no turn of that session ended meanwhile), so a user who keeps talking is not answered
beside its requests (issue 40: turns that overlapped one took 2-3x as long); it waits at most
`QUIET_WAIT_CAP_S`, and not at all once the context is past `URGENT_SHARE` of the window.
At most `AT_ONCE` background compactions run together (when many sessions fall due in one
wave, the rest wait their turn instead of each opening model connections beside the turns;
the soak of issue 40 saw the pool's sockets grow with every wave); one whose context is past
`URGENT_SHARE` does not wait in that queue either. `compact_now(key)` is the
`/compact` command (never queued: the user is waiting on it). The summarised messages are
removed and the summary stored in the same transaction; messages saved meanwhile by another
run are kept. The compaction's requests begin as the chat's own (`ChatPrefix`: the prompt
and session facts the last turn used, the chat's tools, the history its next turn would
send, the session's cache plan), so they read the chat's prompt cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from agents.cache_policy import CachePolicy
from agents.compaction import ChatPrefix, Compactor
from agents.history import user_turn_starts
from agents.model import ModelError
from agents.pricing import context_window
from agents.prompt import PromptBuilder
from agents.tools.base import ToolContext, ToolRegistry
from bot.config.schema import Config
from bot.hub.model_choice import ModelChoices
from bot.hub.turn_inputs import chat_history
from bot.kernel.people import People, owners_of, private_entries
from bot.kernel.session_facts import runtime_info
from bot.kernel.sessions import SessionKey
from bot.kernel.turn_outcome import SessionState
from bot.store.roles import History, Sessions, UsageLedger

log = logging.getLogger(__name__)

QUIET_S = 1.0  # a compaction starts once its chat has had no turn end for this long ...
QUIET_WAIT_CAP_S = 30.0  # ... or this long after it fell due, whichever comes first
URGENT_SHARE = 0.9  # past this share of the context window it starts at once
AT_ONCE = 2  # background compactions running together; the others wait their turn


class UpkeepStore(Sessions, History, UsageLedger, Protocol):
    """What compaction reads and rewrites."""


class SessionUpkeep:
    def __init__(
        self,
        config: Config,
        store: UpkeepStore,
        compactor: Compactor,
        prompts: PromptBuilder,
        models: ModelChoices | None = None,  # a session's /model choice compacts it too
        *,
        tools: ToolRegistry,  # the chat's tools: the flush offers them all
        cache: CachePolicy,  # the sessions' prompt-cache plans, shared with the turns
        people: People | None = None,  # whom a session's flush acts for (None: from config)
        quiet: float = QUIET_S,
    ) -> None:
        self.config = config
        self.store = store
        self.compactor = compactor
        self.prompts = prompts
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: dict[str, tuple[float, SessionState]] = {}  # due: last turn's end, state
        self.quiet = quiet
        self._slots = asyncio.Semaphore(AT_ONCE)
        self.queued = 0  # background compactions waiting for a slot
        self.models = models
        self.tools = tools
        self.cache = cache
        self.people = people or People(owners_of(config.channels.all()))
        self.window = config.agent.context_window or context_window(config.agent.model)

    async def after_run(self, session: SessionState) -> None:
        if session.key in self._busy:
            if session.key in self._waiting:  # still talking: the compaction waits on
                self._waiting[session.key] = (time.monotonic(), session)
            return
        if not self.compactor.policy.due(session.messages, session.context_tokens):
            return
        self._busy.add(session.key)
        if session.context_tokens < self.window * URGENT_SHARE and self.quiet > 0:
            self._waiting[session.key] = (time.monotonic(), session)
        task = asyncio.create_task(self._compact_when_quiet(session.key, session))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def compact_now(self, key: SessionKey) -> str:
        if str(key) in self._busy:
            return "Already compacting this conversation."
        self._busy.add(str(key))
        try:
            removed = await self._compact(str(key))
        except ModelError as exc:
            return f"Could not compact: {exc}"
        finally:
            self._busy.discard(str(key))
        if removed == 0:
            return "Nothing to compact yet."
        return f"Compacted: {removed} older messages are now a summary."

    async def wait_idle(self) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def stop(self) -> None:
        """Abandon compactions in progress (nothing is written until one completes)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def _compact_when_quiet(self, key: str, state: SessionState) -> None:
        try:
            cap = time.monotonic() + QUIET_WAIT_CAP_S
            while key in self._waiting:
                last, state = self._waiting[key]
                wait = min(last + self.quiet, cap) - time.monotonic()
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self._busy.discard(key)
            raise
        finally:
            self._waiting.pop(key, None)
        await self._compact_quietly(key, state)

    async def _compact_quietly(self, key: str, state: SessionState) -> None:
        try:
            if state.context_tokens >= self.window * URGENT_SHARE:
                await self._compact(key, state)  # its context is nearly full: no queue
                return
            self.queued += 1
            try:
                await self._slots.acquire()
            finally:
                self.queued -= 1
            try:
                await self._compact(key, state)
            finally:
                self._slots.release()
        except ModelError as exc:
            log.warning("compaction of %s failed: %s", key, exc)
        except Exception:
            log.exception("compaction of %s failed", key)
        finally:
            self._busy.discard(key)

    async def _compact(self, key: str, state: SessionState | None = None) -> int:
        session = await self.store.session(key)
        rows = await self.store.messages_with_ids(session.id)
        messages = [m for _, m in rows]
        chosen = await self.models.chosen(key) if self.models is not None else ""
        model = chosen or self.config.agent.model
        parsed = SessionKey.parse(key)
        runtime = state.runtime if state is not None else None
        if runtime is None or runtime.model != model:
            runtime = runtime_info(self.config, parsed, parsed.root.channel, model)
        turns = self.config.agent.history_turns
        chat = ChatPrefix(
            system=self.prompts.build(state.mode if state is not None else "full", runtime),
            tools=self.tools,
            history=chat_history(self.config, session.summary, messages, self.window),
            cache=self.cache.current(key),
            complete=len(user_turn_starts(messages)) <= turns,
        )
        result = await self.compactor.compact(
            messages,
            session.summary,
            chat=chat,
            context=ToolContext(
                workspace=self.config.workspace,
                session_key=key,
                depth=parsed.depth,
                model=chosen or None,
                private=private_entries(await self.people.person(key)),
            ),
        )
        if result is None:
            return 0
        upto_id = rows[result.summarised - 1][0]
        removed = await self.store.compact(session.id, result.summary, upto_id)
        await self.store.add_usage(key, result.usage, model=model)
        log.info(
            "compacted %s: %d messages summarised (memory flush %s)",
            key,
            removed,
            "ran" if result.flushed else "skipped",
        )
        return removed
