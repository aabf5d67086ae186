"""What a turn starts its request from: the stored session and its history, read so a turn's
cost does not grow with the session's length, and the history as it is sent (the session
facts of the prompt are `bot/kernel/session_facts.py`'s). Compaction (`bot.hub.upkeep`)
starts its own request the same way, so it reads the chat's prompt cache.
"""

from __future__ import annotations

from typing import Protocol

from agents.compaction import with_summary
from agents.history import prepare_history, user_turn_starts
from agents.model import Message
from bot.config.schema import Config
from bot.store.roles import History, Sessions
from bot.store.rows import SessionRow


class TurnStore(Sessions, History, Protocol):
    """What a turn reads and writes: its session and the history."""


def chat_history(config: Config, summary: str, stored: list[Message], window: int) -> list[Message]:
    """The history a chat's next request sends: the summary pair, then the stored messages
    through the history pipeline (turn limit, older images as notes, pairing repair)."""
    return prepare_history(
        with_summary(summary, stored),
        max_turns=config.agent.history_turns,
        context_window_tokens=window,
        keep_image_turns=config.agent.image_turns - 1,  # the turn an image arrives counts
    )


async def load_history(
    store: TurnStore, session_id: str, max_turns: int
) -> tuple[list[Message], int]:
    """The stored messages the turn limit can use (from the first of the last `max_turns`
    user turns on; all of them if the session has fewer) and how many the session holds.
    Reads a tail and widens it until it holds enough turns, so a turn's cost does not grow
    with the session's length."""
    if max_turns <= 0:
        stored = await store.messages(session_id)
        return stored, len(stored)
    limit = _first_limit(max_turns)
    stored, total = await store.recent_messages(session_id, limit)
    return await _widened(store, session_id, max_turns, limit, stored, total)


async def load_session(
    store: TurnStore, key: str, max_turns: int
) -> tuple[SessionRow, list[Message], int]:
    """The session for `key` (created on first use) with what `load_history` gives; the
    session and the first tail come in one read."""
    if max_turns <= 0:
        session = await store.session(key)
        return (session, *await load_history(store, session.id, max_turns))
    limit = _first_limit(max_turns)
    session, stored, total = await store.session_with_recent(key, limit)
    return (session, *await _widened(store, session.id, max_turns, limit, stored, total))


def _first_limit(max_turns: int) -> int:
    return max_turns * 2 + 16  # a chat turn is two messages; tool rounds widen it


async def _widened(
    store: TurnStore, session_id: str, max_turns: int, limit: int, stored: list[Message], total: int
) -> tuple[list[Message], int]:
    while True:
        if len(stored) >= total:
            return stored, total
        starts = user_turn_starts(stored)
        if len(starts) >= max_turns:  # more turns stored before: the cut limit_turns makes
            return stored[starts[-max_turns] :], total
        limit *= 4
        stored, total = await store.recent_messages(session_id, limit)
