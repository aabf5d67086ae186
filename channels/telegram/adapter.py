"""The Telegram adapter: python-telegram-bot's `Application` run inside the daemon's loop.

Owns the Bot API connection (long polling, or the webhook listener of `webhook`), its status, and handing
messages on in per-chat order; reading a message into an `Inbound` is in `inbound`, delivery
in `delivery`, choice cards (inline keyboards, taps) in `choices`, the streaming preview in `stream`, settings in `options`, pure text handling
in `text`, the registry's view of the platform in `plugin`.

Decisions: `account` is the bot's numeric id (the token's part before ":", as getMe says);
answers quote the triggering message in groups only; `/cmd@otherbot` in a group is dropped;
messages without text, caption, image, voice, audio or document (stickers) are dropped; status turns "up" again
when a long poll completes (at most `poll_timeout` s after recovery); stop() cancels handlers
still running, so the daemon should stop channels after its runs have finished."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

from telegram import Message, Update
from telegram.constants import ChatAction
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application, ContextTypes, TypeHandler

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    Choice,
    ChoiceCard,
    FinalOnlyStream,
    Inbound,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    ReplyStream,
)
from channels.chunking import split_markdown
from channels.formatting import utf16_len
from channels.reconnect import Backoff, connect_until_up
from channels.telegram.choices import TelegramChoices
from channels.telegram.delivery import TelegramSender
from channels.telegram.errors import describe_error
from channels.telegram.inbound import TelegramReader
from channels.telegram.media import TelegramMedia
from channels.telegram.options import TelegramOptions
from channels.telegram.polling import UPDATER_LOGGER, ObservedRequest, QuietFinalPoll
from channels.telegram.redaction import LOGGER_NAME, SecretRedactor, library_loggers
from channels.telegram.stream import TelegramReplyStream
from channels.telegram.webhook import WebhookServer
from channels.typing import keep_typing

log = logging.getLogger(LOGGER_NAME)

RECONNECT_MAX_DELAY = 30.0
STOP_TIMEOUT = 2.0
START_WAIT = 15.0  # start() returns after this even if the first attempt still hangs
UPDATES = ["message", "callback_query"]  # messages, and taps on choice cards' buttons


class TelegramChannel:
    """A Telegram bot as a Perch channel. `account` is the bot's numeric id as a string."""

    name = "telegram"

    def __init__(self, options: TelegramOptions) -> None:
        os.environ.setdefault("PTB_TIMEDELTA", "1")  # opt in to PTB's timedelta durations
        self._opt = options
        self.account = str(options.bot_id)
        self._username = ""
        self._redactor = SecretRedactor([options.token, options.webhook_secret])
        self._sender = TelegramSender(options, self._redactor, lambda: self._app)
        self._reader = TelegramReader(options, self._sender, self._redactor)
        self._media = TelegramMedia(options, self._sender, self._redactor)
        self._choices = TelegramChoices(self._sender, self.account)
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._on_message: InboundHandler | None = None
        self._status = ChannelStatus(self.name, False, "not started")
        self._stopping = False
        self._polling = False  # getUpdates outcomes count for status only once polling runs
        self._first_attempt = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._webhook = WebhookServer(options, self._on_webhook_update)
        self._tasks = BackgroundTasks(log, "telegram")
        self._spawn = self._tasks.spawn  # a background task that stop() cancels
        self._tails: dict[str, asyncio.Future[None]] = {}
        self._logged: list[tuple[logging.Logger, logging.Filter]] = []

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        """Connect and start receiving; if Telegram is unreachable, keep trying in the background.

        Returns after the first connection attempt (bounded by the HTTP timeouts), never raises
        for network trouble: `status()` says whether the bot is up.
        """
        if self._supervisor is not None:
            raise RuntimeError("TelegramChannel.start() called twice; call stop() first")
        self._on_message = on_message
        self._stopping = False
        self._first_attempt.clear()
        self._polling = False
        quiet = (logging.getLogger(UPDATER_LOGGER), QuietFinalPoll())
        for logger, filtered in [*((lg, self._redactor) for lg in library_loggers()), quiet]:
            logger.addFilter(filtered)
            self._logged.append((logger, filtered))
        self._app = self._build_app()
        self._set_status(False, f"connecting to {self._opt.base_url}", quiet=True)
        self._supervisor = asyncio.create_task(self._connect_until_up(), name="telegram-connect")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_attempt.wait(), START_WAIT)

    async def stop(self) -> None:
        """Stop polling (or the webhook), cancel handlers still running, close connections."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        await self._tasks.cancel_all(timeout=None)
        self._tails.clear()
        await self._webhook.stop()
        app = self._app
        if app is not None:
            try:
                await asyncio.wait_for(self._shutdown_app(app), STOP_TIMEOUT)
            except TimeoutError:
                log.warning("Telegram did not shut down within %.0f s; dropped it", STOP_TIMEOUT)
            except Exception as exc:
                log.warning("Telegram shutdown failed: %s", self._redactor.redact(str(exc)))
            self._app = None
        self._set_status(False, "stopped", quiet=True)
        for logger, filtered in self._logged:
            logger.removeFilter(filtered)
        self._logged.clear()

    @staticmethod
    async def _shutdown_app(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()

    def status(self) -> ChannelStatus:
        return self._status

    def _build_app(self) -> Application[Any, Any, Any, Any, Any, Any]:
        opt = self._opt
        # One request (one aiohttp session, one keep-alive pool) for the calls and the long
        # poll: 64 calls at once beside it; PTB reads the poll's read timeout from it too.
        request = ObservedRequest(self._on_poll_result, connection_pool_size=65)
        app = (
            Application.builder()
            .token(opt.token)
            .base_url(opt.base_url)
            .base_file_url(opt.file_url)
            .request(request)
            .get_updates_request(request)
            .rate_limiter(self._sender.flood)
            .job_queue(None)
            .build()
        )
        app.add_handler(TypeHandler(Update, self._on_update))
        return app

    async def _connect_until_up(self) -> None:
        def failed(exc: Exception, delay: float) -> bool:
            if isinstance(exc, InvalidToken):
                self._set_status(
                    False,
                    "Telegram rejected the bot token (401/404): check channels.telegram.token "
                    "(a fresh one comes from @BotFather) and restart",
                )
                return False
            self._set_status(
                False,
                f"cannot reach the Bot API at {self._opt.base_url} ({self._describe(exc)}); "
                f"retrying in {delay:.3g} s",
            )
            return True

        backoff = Backoff(self._opt.reconnect_delay, RECONNECT_MAX_DELAY)
        await connect_until_up(
            self._connect, backoff, on_failure=failed, attempted=self._first_attempt
        )

    async def _connect(self) -> None:
        app = self._app
        assert app is not None
        await app.initialize()
        self._username = app.bot.username or ""
        if app.bot.id != self._opt.bot_id:
            log.warning(
                "Telegram getMe says bot id %s but the token starts with %s; using %s",
                app.bot.id,
                self._opt.bot_id,
                self.account,
            )
        if not app.running:
            await app.start()
        if self._opt.mode == "webhook":
            await self._start_webhook(app)
            self._set_status(True, f"webhook {self._opt.webhook_url} as @{self._username}")
            return
        assert app.updater is not None
        self._polling = True
        if not app.updater.running:
            await app.updater.start_polling(
                timeout=timedelta(seconds=self._opt.poll_timeout),
                allowed_updates=UPDATES,
                error_callback=self._on_poll_error,
            )
        self._set_status(True, f"polling as @{self._username}")

    async def _start_webhook(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        opt = self._opt
        await self._webhook.start()
        await app.bot.set_webhook(
            opt.webhook_url, secret_token=opt.webhook_secret, allowed_updates=UPDATES
        )

    async def _on_webhook_update(self, payload: Any) -> int:
        """An authentic webhook post's body -> the HTTP status to answer Telegram."""
        app = self._app
        if app is None:
            return 503
        try:
            update = Update.de_json(payload, app.bot)
        except Exception as exc:
            log.warning("Telegram webhook: unreadable update (%s)", exc)
            return 400
        if self._stopping:
            return 503  # Telegram posts it again (to another instance)
        task = self._receive(update)
        if task is not None:
            await asyncio.shield(task)  # 200 only once the message is handed on
        return 200

    def _on_poll_result(self, error: BaseException | None) -> None:
        """Every getUpdates outcome (PTB's error_callback misses timeouts and flood waits)."""
        if self._stopping or not self._polling:
            return
        if error is None:
            self._set_status(True, f"polling as @{self._username}")
        elif isinstance(error, InvalidToken):
            self._set_status(
                False, "Telegram rejected the bot token: fix channels.telegram.token and restart"
            )
        else:
            self._set_status(False, f"polling failed ({self._describe(error)}); retrying")

    def _on_poll_error(self, error: TelegramError) -> None:
        """PTB's polling error_callback: status only, instead of PTB's traceback per failure."""
        self._on_poll_result(error)

    def _describe(self, exc: BaseException) -> str:
        return describe_error(exc, self._redactor.redact)

    def _set_status(self, up: bool, detail: str, *, quiet: bool = False) -> None:
        detail = self._redactor.redact(detail)
        previous = self._status
        self._status = ChannelStatus(self.name, up, detail)
        same = previous.up == up and previous.detail.split(";")[0] == detail.split(";")[0]
        if quiet or same:
            return
        if up:
            log.info("telegram up: %s", detail)
        else:
            log.warning("telegram down: %s", detail)

    # -- receiving ------------------------------------------------------------------------

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        self._receive(update)

    def _receive(self, update: Update) -> asyncio.Task[None] | None:
        """Start handing one update on (in per-chat order); the task, or None if dropped."""
        if update.callback_query is not None and not self._stopping:
            tap = self._choices.read_tap(update.callback_query)
            return self._spawn(self._hand_on(tap), "telegram-tap") if tap else None
        message = update.message  # edited messages, channel posts etc. arrive elsewhere: ignored
        if message is None or self._stopping or not self._reader.wanted(message, self._username):
            return None
        key = f"{message.chat.id}"
        previous = self._tails.get(key)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = turn
        return self._spawn(self._dispatch(message, previous, turn, key), "telegram-inbound")

    async def _dispatch(
        self,
        message: Message,
        previous: asyncio.Future[None] | None,
        turn: asyncio.Future[None],
        key: str,
    ) -> None:
        """Normalise one message and hand it on, entering `on_message` in per-chat order."""
        try:
            inbound = await self._reader.normalise(message, self._username)
            if previous is not None:
                await asyncio.wait([previous])
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram: could not read message %s", message.message_id)
            return
        finally:
            if not turn.done():
                turn.set_result(None)
            if self._tails.get(key) is turn:
                del self._tails[key]
        await self._hand_on(inbound)

    async def _hand_on(self, inbound: Inbound) -> None:
        assert self._on_message is not None
        try:
            await self._on_message(inbound)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "telegram: the message handler failed for chat %s message %s",
                inbound.chat.chat_id,
                inbound.message_id,
            )

    # -- sending --------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as Telegram HTML, chunked, in order for this chat.

        Raises `TelegramDeliveryError` when Telegram refuses or stays unreachable.
        """
        if not out.text.strip():
            return
        await self._sender.send_chunks(
            out.chat,
            split_markdown(out.text, self._opt.chunk_limit, measure=utf16_len),
            True,
            urgent=out.urgent,
        )

    async def send_file(self, out: OutboundFile) -> None:
        await self._media.send_file(out)

    async def send_choice(self, card: ChoiceCard) -> str:
        return await self._choices.send(card)

    async def answer_choice(self, chat: ChatRef, choice: Choice, note: str) -> None:
        await self._choices.answer(choice, note)

    async def settle_choice(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self._choices.settle(chat, message_id, text)

    async def send_voice(self, out: OutboundVoice) -> None:
        await self._media.send_voice(out)

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        await self._media.react(chat, message_id, author, emoji, remove=remove)

    # -- typing and streaming -------------------------------------------------------------

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """Show "typing…" in the chat (and topic) until the block exits."""
        thread = int(chat.thread_id) if chat.thread_id else None

        async def start() -> None:
            if self._sender.flood.limited(chat.chat_id) or self._sender.flood.saturated():
                return  # cosmetic: not worth a call (or a paced slot) while Telegram is busy
            bot = self._sender.bot_app().bot
            await bot.send_chat_action(chat.chat_id, ChatAction.TYPING, message_thread_id=thread)

        return keep_typing(start, None, self._opt.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        if self._opt.streaming == "off":
            return FinalOnlyStream(self.send, chat)
        return TelegramReplyStream(
            self._sender,
            chat,
            interval=self._opt.stream_interval,
            limit=self._opt.chunk_limit,
            spawn=self._spawn,
        )
