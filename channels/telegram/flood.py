"""Telegram's flood control, honoured before every Bot API call: per chat and for the bot.

Owns `FloodControl`, the PTB rate limiter (`Application.builder().rate_limiter(...)`) that
every Bot API call except getUpdates passes through, so new endpoints get it for free. A 429
(`RetryAfter`) on any call to a chat (a preview edit, a typing action, a final send) sets
that chat's not-before time; a 429 on a call without a chat sets one for the whole bot. Every
later call to the chat waits until both have passed; best-effort calls (previews, typing) ask
`limited(chat)` first and are skipped instead. Calls to chats are also paced to Telegram's
overall limit (30 a second), which costs nothing below it; typing skips a beat while that pace
is `saturated()`, so it never takes a slot a reply is waiting for. A command's answer passes
`rate_limit_args=URGENT` and skips that pace (not a chat's flood limit): `/stop` in one chat
is answered at once while another chat's flood of replies waits its turn. (Telegram's
30-a-second figure is a guideline enforced with 429s, which this class honours anyway.)

PTB's own `AIORateLimiter` was considered: with retries it stops every chat for one chat's
429, without them it keeps no not-before time at all (and logs a traceback per 429), and its
per-group pacing (20 a minute) would hold a final answer behind a long reply's previews.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from channels.telegram.errors import retry_after_seconds
from channels.telegram.redaction import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

MAX_FLOOD_WAIT = 120.0  # a call would wait longer than this: it fails with RetryAfter instead
OVERALL_PER_SECOND = 30  # Telegram's documented limit for one bot across all chats
_FORGET_AFTER = 1024  # chats remembered before expired entries are dropped


def _chat_key(chat_id: object) -> str | None:
    return None if chat_id is None else str(chat_id)


URGENT = "urgent"  # `rate_limit_args` of a call that goes ahead of the overall pace


class FloodControl(BaseRateLimiter[str | None]):
    """Not-before times per chat and for the bot, kept from Telegram's 429 answers."""

    def __init__(
        self, *, per_second: int = OVERALL_PER_SECOND, max_wait: float = MAX_FLOOD_WAIT
    ) -> None:
        self._max_wait = max_wait
        self._chats: dict[str, float] = {}
        self._bot = 0.0
        self._recent: deque[float] = deque(maxlen=max(per_second, 0))  # 0: no overall pace

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to close."""

    def not_before(self, chat_id: int | str | None) -> float:
        """The `time.monotonic()` before which no call to `chat_id` may go out."""
        key = _chat_key(chat_id)
        chat = self._chats.get(key, 0.0) if key is not None else 0.0
        return max(self._bot, chat)

    def limited(self, chat_id: int | str | None) -> bool:
        """Whether a call to `chat_id` would have to wait for a flood limit now."""
        return self.not_before(chat_id) > time.monotonic()

    def saturated(self) -> bool:
        """Whether a call to a chat would wait for Telegram's overall pace now (every slot of
        the coming second is taken): best-effort calls skip a turn rather than queue."""
        recent = self._recent
        return bool(recent) and len(recent) == recent.maxlen and recent[0] + 1.0 > time.monotonic()

    def hold(self, chat_id: int | str | None, seconds: float, what: str = "a call") -> None:
        """Telegram asked to wait `seconds` after `what` to `chat_id` (None: the whole bot)."""
        until = time.monotonic() + seconds
        key = _chat_key(chat_id)
        if key is None:
            self._bot = max(self._bot, until)
            log.info("telegram: flood limit on %s; every call waits %.1f s", what, seconds)
            return
        if len(self._chats) >= _FORGET_AFTER:
            now = time.monotonic()
            self._chats = {k: t for k, t in self._chats.items() if t > now}
        self._chats[key] = max(self._chats.get(key, 0.0), until)
        log.info(
            "telegram: flood limit on %s in chat %s; calls to that chat wait %.1f s",
            what,
            chat_id,
            seconds,
        )

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | dict[str, Any] | list[dict[str, Any]]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: str | None,
    ) -> bool | dict[str, Any] | list[dict[str, Any]]:
        chat_id = data.get("chat_id")
        await self._wait_until_allowed(chat_id)
        if chat_id is not None and rate_limit_args != URGENT:
            await self._pace()
        try:
            return await callback(*args, **kwargs)
        except RetryAfter as exc:
            self.hold(chat_id, retry_after_seconds(exc), endpoint)
            raise

    async def _wait_until_allowed(self, chat_id: int | str | None) -> None:
        while (delay := self.not_before(chat_id) - time.monotonic()) > 0:
            if delay > self._max_wait:  # as if Telegram had answered 429 itself
                raise RetryAfter(int(delay) + 1)
            await asyncio.sleep(delay)  # and look again: another 429 may have come meanwhile

    async def _pace(self) -> None:
        """At most `per_second` calls to chats in any second: each takes the next free slot."""
        recent = self._recent
        if not recent.maxlen:
            return
        now = time.monotonic()
        slot = now if len(recent) < (recent.maxlen or 0) else max(now, recent[0] + 1.0)
        recent.append(slot)
        if slot > now:
            await asyncio.sleep(slot - now)
