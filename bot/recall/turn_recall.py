"""Recall per turn: what the index holds about a new message, put in front of the model.

`TurnRecall.blocks(key, session_id, text, history)` runs before a chat turn's model call:
a query of the new message's words, with the last few turns' words as context
(`SearchQuery.of`), over the sources `agent.recall.sources` names (skills only while the
catalog is in search mode: otherwise the prompt lists them all already), in the scopes this
chat may see (`bot/recall/visibility.py`), leaving out this session (its history is in the
request already). Only documents scoring at least `agent.recall.min_score` come back, so an
off-topic message recalls nothing; the best `max_snippets`, cut around their matching
words, within `max_tokens`, become one `<recalled_context>` block (`agents.recall`).
Chats only: cron, heartbeat and sub-agent turns recall nothing.

Where the block goes: the turn's user message, after the time, so after every cache
breakpoint but the request's last: the tools, the system prompt and the history stay the
same bytes, and nothing of the cached prefix is written again for it. It is not saved with
the message (`TurnRunner` takes it out before the save): the history stays lean, a later
turn never carries a stale or repeated snippet, and no session stores copies of another's
text. The price is that the next request reads the cache up to the message before this one
and writes this one turn again (the breakpoint it left sits on the recalled block); the
block is never more than `max_tokens`, and that turn is all that is written twice.
"""

from __future__ import annotations

import logging

from agents.model import Message, TextBlock
from agents.recall import indexable_text, recall_block
from agents.skills.catalog import SkillCatalog
from bot.config.agent import RecallConfig
from bot.kernel.sessions import SessionKey
from bot.recall.index import SearchIndex, recalled
from bot.recall.visibility import Owners, visible_scopes
from bot.store.search_rows import SearchQuery

log = logging.getLogger(__name__)

CONTEXT_MESSAGES = 4  # the last turns' messages whose words add context to the query


class TurnRecall:
    def __init__(
        self,
        config: RecallConfig,
        index: SearchIndex,
        owners: Owners,
        timezone: str = "UTC",
        skills: SkillCatalog | None = None,
    ) -> None:
        self.config = config
        self.index = index
        self.owners = owners
        self.timezone = timezone
        self.skills = skills  # the listed skills are not recalled again

    async def blocks(
        self,
        key: SessionKey,
        session_id: str,
        text: str,
        history: list[Message],
        sender: str | None = None,
    ) -> list[TextBlock]:
        """The recall block for this turn (none when nothing relevant was found); never
        raises. `sender` wrote the message (see `visible_scopes`)."""
        cfg = self.config
        if not cfg.enabled or key.root.kind not in ("dm", "group") or not text.strip():
            return []
        recent = [indexable_text(m) for m in history[-CONTEXT_MESSAGES:]]
        listed = self.skills is None or not self.skills.search_mode()
        query = SearchQuery.of(
            text,
            "\n".join(recent),
            sources=tuple(s for s in cfg.sources if s != "skills" or not listed),
            scopes=visible_scopes(key, self.owners, sender),
            exclude_groups=(session_id,),
            limit=cfg.max_snippets,
            min_score=cfg.min_score,
        )
        try:
            hits = await self.index.search(query)
        except Exception:
            log.exception("recall: the search failed; this turn goes on without it")
            return []
        each = max(cfg.max_tokens * 4 // max(cfg.max_snippets, 1), 160)
        items = [recalled(hit, key, each) for hit in hits]
        block = recall_block(
            items, max_tokens=cfg.max_tokens, max_snippets=cfg.max_snippets, timezone=self.timezone
        )
        return [block] if block is not None else []
