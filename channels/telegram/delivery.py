"""The Telegram send path: one chunk posted, edited or deleted through the Bot API.

Owns `TelegramSender`: per-chat (and topic) ordering, HTML with a plain-text fallback,
migrated chats and vanished topics, flood waits and network retries within bounds, and the
`TelegramDeliveryError` whose text says what to do. Its `flood` (see `flood`) is the bot's
rate limiter: every Bot API call honours the not-before times Telegram's 429s set.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from telegram import Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import Application

from channels.base import ChatRef
from channels.formatting import render_plain
from channels.ordering import ChatLocks
from channels.retry import RetryPolicy, call_with_retries
from channels.telegram.errors import (
    TelegramDeliveryError,
    describe_error,
    is_parse_error,
    retry_after_seconds,
)
from channels.telegram.flood import MAX_FLOOD_WAIT, URGENT, FloodControl
from channels.telegram.options import TelegramOptions
from channels.telegram.redaction import LOGGER_NAME, SecretRedactor
from channels.telegram.render import render_telegram_html

log = logging.getLogger(LOGGER_NAME)

T = TypeVar("T")

MAX_RETRY_AFTER = MAX_FLOOD_WAIT  # a flood wait longer than this fails the send, not blocks


def _retryable(exc: BaseException) -> bool:
    """Flood waits we can sit out, and network trouble; never a refusal."""
    if isinstance(exc, RetryAfter):
        return retry_after_seconds(exc) <= MAX_RETRY_AFTER
    if isinstance(exc, BadRequest | Forbidden | InvalidToken | ChatMigrated | Conflict):
        return False
    return isinstance(exc, NetworkError)


def _flood_wait(exc: BaseException) -> float | None:
    return retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None


class TelegramSender:
    """Bot API calls that deliver to chats, for one channel.

    `current_app` returns the channel's running PTB `Application`, or None when the channel is
    not running (then every call raises `TelegramDeliveryError`).
    """

    def __init__(
        self,
        options: TelegramOptions,
        redactor: SecretRedactor,
        current_app: Callable[[], Application[Any, Any, Any, Any, Any, Any] | None],
    ) -> None:
        self._opt = options
        self._redactor = redactor
        self._current_app = current_app
        self._turns = ChatLocks()
        self.flood = FloodControl()

    async def send_chunks(
        self, chat: ChatRef, chunks: Sequence[str], quote_first: bool, *, urgent: bool = False
    ) -> None:
        async with self._turns.hold((chat.chat_id, chat.thread_id)):
            for index, chunk in enumerate(chunks):
                if chunk.strip():
                    await self.post(
                        chat, chunk, quote=quote_first and index == 0, retry=True, urgent=urgent
                    )

    def bot_app(self) -> Application[Any, Any, Any, Any, Any, Any]:
        app = self._current_app()
        if app is None:
            raise TelegramDeliveryError(
                "the Telegram channel is not running (start() was not called or stop() was)"
            )
        return app

    async def post(
        self, chat: ChatRef, markdown: str, *, quote: bool, retry: bool, urgent: bool = False
    ) -> int:
        """Send one chunk as HTML (plain text if Telegram can't parse it); return its id.
        `urgent` (a command's answer) skips the overall pace, never a chat's flood limit."""
        pace = URGENT if urgent else None
        bot = self.bot_app().bot
        chat_id: int | str = chat.chat_id
        thread = int(chat.thread_id) if chat.thread_id else None
        reply = (
            ReplyParameters(int(chat.reply_to), allow_sending_without_reply=True)
            if quote and chat.is_group and chat.reply_to and chat.reply_to.isdigit()
            else None
        )

        async def attempt(text: str, parse_mode: str | None) -> Message:
            nonlocal chat_id, thread
            for _ in range(3):  # a group upgraded to a supergroup, a deleted forum topic
                request = functools.partial(
                    bot.send_message,
                    chat_id,
                    text,
                    parse_mode=parse_mode,
                    message_thread_id=thread,
                    reply_parameters=reply,
                    rate_limit_args=pace,
                )
                try:
                    return await self.call("sendMessage", chat_id, request, retry=retry)
                except ChatMigrated as exc:
                    log.info("telegram: chat %s is now %s; sending there", chat_id, exc.new_chat_id)
                    chat_id = exc.new_chat_id
                except BadRequest as exc:
                    if thread is None or "thread not found" not in str(exc).lower():
                        raise
                    log.warning(
                        "telegram: topic %s of chat %s is gone; sending to the chat",
                        thread,
                        chat_id,
                    )
                    thread = None
            request = functools.partial(
                bot.send_message, chat_id, text, parse_mode=parse_mode, rate_limit_args=pace
            )
            return await self.call("sendMessage", chat_id, request, retry=retry)

        html = render_telegram_html(markdown)
        try:
            try:
                if not html.strip():
                    # Markup with nothing to show (an empty code block, `[]()`): Telegram
                    # refuses an empty text, so send what was written, as it was written.
                    sent = await attempt(markdown, None)
                else:
                    sent = await attempt(html, ParseMode.HTML)
            except BadRequest as exc:
                if not is_parse_error(exc):
                    raise
                log.info("telegram: HTML refused in chat %s (%s); sending plain text", chat_id, exc)
                sent = await attempt(render_plain(markdown), None)
        except TelegramError as exc:
            raise self.delivery_error("send a message to", chat_id, exc) from None
        return sent.message_id

    async def edit(self, chat: ChatRef, message_id: int, markdown: str, *, retry: bool) -> None:
        """Replace the text of one of our messages; "not modified" counts as done."""
        bot = self.bot_app().bot

        async def attempt(text: str, parse_mode: str | None) -> None:
            try:
                await self.call(
                    "editMessageText",
                    chat.chat_id,
                    lambda: bot.edit_message_text(
                        text, chat_id=chat.chat_id, message_id=message_id, parse_mode=parse_mode
                    ),
                    retry=retry,
                )
            except BadRequest as exc:
                if "not modified" not in str(exc).lower():
                    raise

        try:
            await attempt(render_telegram_html(markdown), ParseMode.HTML)
        except BadRequest as exc:
            if not is_parse_error(exc):
                raise
            log.info("telegram: HTML refused in chat %s (%s); editing as plain", chat.chat_id, exc)
            await attempt(render_plain(markdown), None)

    async def delete(self, chat: ChatRef, message_id: int) -> None:
        bot = self.bot_app().bot
        await self.call(
            "deleteMessage",
            chat.chat_id,
            lambda: bot.delete_message(chat.chat_id, message_id),
            retry=True,
        )

    async def call(
        self,
        what: str,
        chat_id: int | str,
        op: Callable[[], Awaitable[T]],
        *,
        retry: bool = True,
    ) -> T:
        """Run one Bot API call, waiting out flood limits and retrying network errors."""
        policy = RetryPolicy(
            self._opt.send_attempts if retry else 1, self._opt.retry_backoff, jitter=0.2
        )

        def on_retry(exc: BaseException, attempt: int, wait: float) -> None:
            if isinstance(exc, RetryAfter):
                return  # `flood` logged it, and holds every call to the chat until then
            log.warning(
                "telegram: %s in chat %s failed (%s); retry %d/%d in %.1f s",
                what,
                chat_id,
                self.describe(exc),
                attempt,
                policy.attempts - 1,
                wait,
            )

        return await call_with_retries(
            op, policy, retryable=_retryable, wait_hint=_flood_wait, on_retry=on_retry
        )

    def delivery_error(
        self, action: str, chat_id: int | str, exc: TelegramError
    ) -> TelegramDeliveryError:
        if isinstance(exc, Forbidden):
            hint = "the bot was blocked by the user or removed from the chat"
        elif isinstance(exc, RetryAfter):
            hint = f"Telegram's flood limit asks to wait {retry_after_seconds(exc):.0f} s"
        elif isinstance(exc, BadRequest):
            hint = "Telegram refused the request"
        elif isinstance(exc, NetworkError):
            hint = f"Telegram stayed unreachable after {self._opt.send_attempts} attempts"
        else:
            hint = "Telegram returned an error"
        reason = self._redactor.redact(str(exc))
        retry_after = retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None
        return TelegramDeliveryError(
            f"could not {action} Telegram chat {chat_id}: {hint} ({reason})", retry_after
        )

    def describe(self, exc: BaseException) -> str:
        return describe_error(exc, self._redactor.redact)
