"""Session upkeep: when and how a stored conversation is compacted.

`SessionUpkeep.after_run(session)` is called when a turn has been saved; if the session is
due (DESIGN section 4: over 50 messages or 75% of the context window) it compacts it in the
background, at most once at a time per session, so two concurrent group runs never compact
one session twice. `compact_now(key)` is the `/compact` command. The summarised messages are
removed and the summary stored in the same transaction; messages saved meanwhile by another
run are kept.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from agents.compaction import Compactor
from agents.model import ModelError
from agents.prompt import PromptBuilder, RuntimeInfo
from agents.tools.base import ToolContext
from bot.config.schema import Config
from bot.model_choice import ModelChoices
from bot.sessions import SessionKey
from bot.store.roles import History, Sessions, UsageLedger
from bot.turns import SessionState

log = logging.getLogger(__name__)


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
    ) -> None:
        self.config = config
        self.store = store
        self.compactor = compactor
        self.prompts = prompts
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.models = models

    async def after_run(self, session: SessionState) -> None:
        if session.key in self._busy:
            return
        if not self.compactor.policy.due(session.messages, session.context_tokens):
            return
        self._busy.add(session.key)
        task = asyncio.create_task(self._compact_quietly(session.key))
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

    async def _compact_quietly(self, key: str) -> None:
        try:
            await self._compact(key)
        except ModelError as exc:
            log.warning("compaction of %s failed: %s", key, exc)
        except Exception:
            log.exception("compaction of %s failed", key)
        finally:
            self._busy.discard(key)

    async def _compact(self, key: str) -> int:
        session = await self.store.session(key)
        rows = await self.store.messages_with_ids(session.id)
        messages = [m for _, m in rows]
        chosen = await self.models.chosen(key) if self.models is not None else ""
        model = chosen or self.config.agent.model
        runtime = RuntimeInfo(
            agent_id=self.config.agent.id,
            session_key=key,
            model=model,
            timezone=self.config.agent.timezone,
        )
        result = await self.compactor.compact(
            messages,
            session.summary,
            system=self.prompts.build("minimal", runtime),
            context=ToolContext(
                workspace=self.config.workspace,
                session_key=key,
                depth=SessionKey.parse(key).depth,
                model=chosen or None,
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
