"""The Telegram adapter: python-telegram-bot's `Application` run inside the daemon's loop.

Owns the Bot API connection (long polling, or an aiohttp webhook), normalising messages to
`Inbound` and delivering `Outbound` as Telegram HTML (plain-text fallback), typing, previews.

Decisions: `account` is the bot's numeric id (the token's part before ":", as getMe says);
answers quote the triggering message in groups only; `/cmd@otherbot` in a group is dropped;
messages without text, caption or image (stickers, voice) are dropped; status turns "up" again
when a long poll completes (at most `poll_timeout` s after recovery); stop() cancels handlers
still running, so the daemon should stop channels after its runs have finished."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import os
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlsplit

from aiohttp import web
from telegram import Message, MessageEntity, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import Application, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from channels.base import (
    ChannelStatus,
    ChatRef,
    FinalOnlyStream,
    Image,
    Inbound,
    InboundHandler,
    Outbound,
    ReplyStream,
    image_too_large,
)
from channels.chunking import split_markdown
from channels.formatting import render_plain, render_telegram_html
from channels.typing import keep_typing

log = logging.getLogger(__name__)

T = TypeVar("T")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_RETRY_AFTER = 120.0  # a flood wait longer than this fails the send instead of blocking
RECONNECT_MAX_DELAY = 30.0
STOP_TIMEOUT = 2.0
START_WAIT = 15.0  # start() returns after this even if the first attempt still hangs
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_TOKEN_RE = re.compile(r"^(\d+):[A-Za-z0-9_-]+$")
_WEBHOOK_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_]+)@([A-Za-z0-9_]+)")


@dataclass(frozen=True, slots=True)
class TelegramOptions:
    """Settings of the Telegram channel (`channels.telegram` in config.yaml).

    `base_file_url` defaults to `base_url` with its trailing "/bot" turned into "/file/bot",
    which is right for api.telegram.org and for a local Bot API server alike.
    """

    token: str
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str | None = None
    streaming: Literal["off", "partial"] = "partial"
    stream_interval: float = 1.0
    typing_interval: float = 4.0
    max_image_bytes: int = 5_000_000
    poll_timeout: int = 30
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    webhook_secret: str = ""
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443
    chunk_limit: int = 4000
    send_attempts: int = 5
    retry_backoff: float = 0.5
    reconnect_delay: float = 1.0

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError(
                "channels.telegram.token is empty: create a bot with @BotFather and set "
                "TELEGRAM_BOT_TOKEN (or disable the channel)"
            )
        if not _TOKEN_RE.match(self.token):
            raise ValueError(
                "channels.telegram.token does not look like a bot token "
                "(expected '<digits>:<secret>' as @BotFather prints it)"
            )
        if self.mode == "webhook":
            if not self.webhook_url.startswith("https://") and not self.webhook_url.startswith(
                "http://"
            ):
                raise ValueError(
                    "channels.telegram.webhook_url must be the public https:// address Telegram "
                    "posts updates to when mode is 'webhook'"
                )
            if not _WEBHOOK_SECRET_RE.match(self.webhook_secret):
                raise ValueError(
                    "channels.telegram.webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, "
                    "_ or - when mode is 'webhook' (Telegram echoes it so forged posts are refused)"
                )
        if not 1 <= self.chunk_limit <= 4096:
            raise ValueError("channels.telegram.chunk_limit must be between 1 and 4096")
        if self.send_attempts < 1:
            raise ValueError("channels.telegram.send_attempts must be at least 1")

    @property
    def bot_id(self) -> int:
        return int(self.token.split(":", 1)[0])

    @property
    def file_url(self) -> str:
        if self.base_file_url:
            return self.base_file_url
        base = self.base_url.rstrip("/")
        if base.endswith("/bot"):
            return base[: -len("/bot")] + "/file/bot"
        return base + "/file/bot"


class TelegramDeliveryError(RuntimeError):
    """Telegram did not take a message after the bounded retries; the text says why.

    `retry_after` is Telegram's flood wait in seconds when that was the reason.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# ---------------------------------------------------------------------------------------------
# Pure text handling (property-tested)


def _utf16_to_index(text: str, offset: int) -> int:
    """The Python index of a UTF-16 code unit offset, as Telegram counts entity offsets."""
    units = 0
    for index, char in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def _entity_text(text: str, entity: MessageEntity) -> str:
    start = _utf16_to_index(text, entity.offset)
    end = _utf16_to_index(text, entity.offset + entity.length)
    return text[start:end]


def strip_bot_mentions(
    text: str, entities: Sequence[MessageEntity], username: str, bot_id: int
) -> tuple[str, bool]:
    """Remove the bot's mentions from `text` and say whether there was one.

    A mention is a "mention" entity reading `@username` (any case) or a "text_mention" of the
    bot's user id. A leading `/cmd@username` becomes `/cmd` and also counts as addressing the
    bot. Offsets are Telegram's UTF-16 code units. Text around a removed mention is joined with
    one space, and a "," or ":" left at the very start ("@bot, hi") is dropped.
    """
    handle = "@" + username.lower()
    spans: list[tuple[int, int]] = []
    for entity in entities:
        is_ours = (
            entity.type == MessageEntity.MENTION
            and username
            and _entity_text(text, entity).lower() == handle
        ) or (
            entity.type == MessageEntity.TEXT_MENTION
            and entity.user is not None
            and entity.user.id == bot_id
        )
        if is_ours:
            start = _utf16_to_index(text, entity.offset)
            spans.append((start, _utf16_to_index(text, entity.offset + entity.length)))
    mentioned = bool(spans)
    for start, end in sorted(spans, reverse=True):
        left, right = text[:start].rstrip(), text[end:].lstrip()
        text = f"{left} {right}" if left and right else left + right
    if mentioned:
        text = re.sub(r"^\s*[,:]", "", text)
    text = text.strip()
    command = _COMMAND_RE.match(text)
    if command and username and command.group(2).lower() == username.lower():
        text = "/" + command.group(1) + text[command.end() :]
        mentioned = True
    return text, mentioned


def _command_target(text: str) -> str | None:
    """The bot a leading `/cmd@name` is addressed to, if any."""
    match = _COMMAND_RE.match(text.strip())
    return match.group(2) if match else None


def _sniff_image_type(data: bytes) -> str | None:
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _retry_after_seconds(exc: RetryAfter) -> float:
    value: object = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if isinstance(value, int | float) else 1.0


class _SecretRedactor(logging.Filter):
    """Replaces the bot token (and webhook secret) in log records of PTB, httpx and ours."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms.update({secret, quote(secret, safe=""), quote(secret)})
        self._forms = sorted(forms, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, "<redacted>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self.redact(formatted)
        return True


def _library_loggers() -> list[logging.Logger]:
    names = ["httpx", "httpcore", "aiohttp.access", "aiohttp.server", __name__]
    names += [
        name
        for name, obj in logging.Logger.manager.loggerDict.items()
        if isinstance(obj, logging.Logger) and name.startswith(("telegram", "httpcore"))
    ]
    return [logging.getLogger(name) for name in dict.fromkeys(names)]


class _ObservedRequest(HTTPXRequest):
    """HTTPXRequest that reports every getUpdates outcome, so polling health is visible."""

    def __init__(self, on_poll: Callable[[BaseException | None], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_poll = on_poll

    async def do_request(
        self, url: str, method: str, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        if not url.endswith("/getUpdates"):
            return await super().do_request(url, method, *args, **kwargs)
        try:
            code, payload = await super().do_request(url, method, *args, **kwargs)
        except Exception as exc:
            self._on_poll(exc)
            raise
        self._on_poll(None if 200 <= code < 300 else _poll_error(code, payload))
        return code, payload


def _poll_error(code: int, payload: bytes) -> TelegramError:
    """The error PTB will raise for a failed getUpdates answer, for the status line."""
    try:
        body = json.loads(payload)
        description = str(body.get("description") or f"HTTP {code}")
        retry_after = (body.get("parameters") or {}).get("retry_after")
    except (ValueError, AttributeError):
        description, retry_after = f"HTTP {code}", None
    if retry_after:
        return RetryAfter(retry_after)
    if code in (401, 404):
        return InvalidToken(description)
    if code == 409:
        return Conflict(description)
    return NetworkError(description)


# ---------------------------------------------------------------------------------------------
# The channel


class TelegramChannel:
    """A Telegram bot as a Perch channel. `account` is the bot's numeric id as a string."""

    name = "telegram"

    def __init__(self, options: TelegramOptions) -> None:
        os.environ.setdefault("PTB_TIMEDELTA", "1")  # opt in to PTB's timedelta durations
        self._opt = options
        self.account = str(options.bot_id)
        self._username = ""
        self._redactor = _SecretRedactor([options.token, options.webhook_secret])
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._on_message: InboundHandler | None = None
        self._status = ChannelStatus(self.name, False, "not started")
        self._stopping = False
        self._polling = False  # getUpdates outcomes count for status only once polling runs
        self._first_attempt = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._webhook_runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._tails: dict[str, asyncio.Future[None]] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._logged: list[logging.Logger] = []

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
        for logger in _library_loggers():
            logger.addFilter(self._redactor)
            self._logged.append(logger)
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
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tails.clear()
        if self._webhook_runner is not None:
            await self._webhook_runner.cleanup()
            self._webhook_runner = None
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
        for logger in self._logged:
            logger.removeFilter(self._redactor)
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
        poll_request = _ObservedRequest(
            self._on_poll_result, connection_pool_size=1, read_timeout=10.0
        )
        request = _ObservedRequest(self._on_poll_result, connection_pool_size=64)
        app = (
            Application.builder()
            .token(opt.token)
            .base_url(opt.base_url)
            .base_file_url(opt.file_url)
            .request(request)
            .get_updates_request(poll_request)
            .job_queue(None)
            .build()
        )
        app.add_handler(TypeHandler(Update, self._on_update))
        return app

    async def _connect_until_up(self) -> None:
        delay = self._opt.reconnect_delay
        while not self._stopping:
            try:
                await self._connect()
            except asyncio.CancelledError:
                raise
            except InvalidToken:
                self._set_status(
                    False,
                    "Telegram rejected the bot token (401/404): check channels.telegram.token "
                    "(a fresh one comes from @BotFather) and restart",
                )
                self._first_attempt.set()
                return
            except Exception as exc:
                self._set_status(
                    False,
                    f"cannot reach the Bot API at {self._opt.base_url} ({self._describe(exc)}); "
                    f"retrying in {delay:.3g} s",
                )
                self._first_attempt.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
                continue
            self._first_attempt.set()
            return

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
                allowed_updates=["message"],
                error_callback=self._on_poll_error,
            )
        self._set_status(True, f"polling as @{self._username}")

    async def _start_webhook(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        opt = self._opt
        if self._webhook_runner is None:
            server = web.Application()
            path = urlsplit(opt.webhook_url).path or "/"
            server.router.add_post(path, self._on_webhook_post)
            runner = web.AppRunner(server, access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            try:
                await web.TCPSite(runner, opt.webhook_listen, opt.webhook_port).start()
            except OSError:
                await runner.cleanup()
                raise
            self._webhook_runner = runner
        await app.bot.set_webhook(
            opt.webhook_url, secret_token=opt.webhook_secret, allowed_updates=["message"]
        )

    async def _on_webhook_post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self._opt.webhook_secret.encode()):
            log.warning("Telegram webhook: refused a post without the right secret token")
            return web.Response(status=403)
        app = self._app
        if app is None:
            return web.Response(status=503)
        try:
            payload = await request.json()
            update = Update.de_json(payload, app.bot)
        except Exception as exc:
            log.warning("Telegram webhook: unreadable update (%s)", exc)
            return web.Response(status=400)
        await app.update_queue.put(update)
        return web.Response()

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
        if isinstance(exc, RetryAfter):
            return f"rate limited for {_retry_after_seconds(exc):.0f} s"
        if isinstance(exc, TimedOut):
            return "timed out"
        if isinstance(exc, InvalidToken):
            return "token rejected: check channels.telegram.token"
        if isinstance(exc, Conflict):
            return "another process is polling this bot: run only one instance per token"
        text = str(exc) or type(exc).__name__
        return self._redactor.redact(text)

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
        message = update.message  # edited messages, channel posts etc. arrive elsewhere: ignored
        if message is None or self._stopping or not self._wanted(message):
            return
        key = f"{message.chat.id}"
        previous = self._tails.get(key)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = turn
        self._spawn(self._dispatch(message, previous, turn, key), "telegram-inbound")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A background task that stop() cancels."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _wanted(self, message: Message) -> bool:
        if message.chat.type not in ("private", "group", "supergroup"):
            return False
        sender = message.from_user
        if sender is not None and sender.id == self._opt.bot_id:
            return False
        if message.chat.type != "private":
            target = _command_target(message.text or message.caption or "")
            if target and target.lower() != self._username.lower():
                return False  # a command for another bot in the same group
        return bool(
            message.text or message.caption or message.photo or self._image_document(message)
        )

    async def _dispatch(
        self,
        message: Message,
        previous: asyncio.Future[None] | None,
        turn: asyncio.Future[None],
        key: str,
    ) -> None:
        """Normalise one message and hand it on, entering `on_message` in per-chat order."""
        try:
            inbound = await self._normalise(message)
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

    async def _normalise(self, message: Message) -> Inbound:
        is_dm = message.chat.type == "private"
        text = message.text or message.caption or ""
        entities = message.entities or message.caption_entities or ()
        text, mentioned = strip_bot_mentions(text, entities, self._username, self._opt.bot_id)
        reply = message.reply_to_message
        if (
            reply is not None
            and reply.forum_topic_created is None  # topic messages "reply" to the topic's root
            and reply.from_user is not None
            and reply.from_user.id == self._opt.bot_id
        ):
            mentioned = True
        thread = message.message_thread_id if message.is_topic_message else None
        images, notes = await self._collect_images(message)
        if notes:
            text = "\n".join([text, *notes]).strip()
        sender = message.from_user
        chat = ChatRef(
            channel=self.name,
            account=self.account,
            kind="dm" if is_dm else "group",
            chat_id=str(message.chat.id),
            thread_id=str(thread) if thread is not None else None,
            reply_to=str(message.message_id),
        )
        return Inbound(
            chat=chat,
            sender_id=str(sender.id) if sender else str(message.chat.id),
            text=text,
            message_id=str(message.message_id),
            sender_name=(sender.full_name or sender.username or "") if sender else "",
            mentioned=mentioned,
            images=tuple(images),
        )

    @staticmethod
    def _image_document(message: Message) -> bool:
        document = message.document
        return document is not None and (document.mime_type or "").startswith("image/")

    async def _collect_images(self, message: Message) -> tuple[list[Image], list[str]]:
        cap = self._opt.max_image_bytes
        if message.photo:
            fitting = [p for p in message.photo if p.file_size is None or p.file_size <= cap]
            if not fitting:
                smallest = min(p.file_size or 0 for p in message.photo)
                return [], [image_too_large(cap, smallest)]
            best = max(fitting, key=lambda p: (p.width * p.height, p.file_size or 0))
            file_id, declared = best.file_id, "image/jpeg"
        elif self._image_document(message):
            document = message.document
            assert document is not None
            if document.file_size is not None and document.file_size > cap:
                return [], [image_too_large(cap, document.file_size)]
            file_id, declared = document.file_id, document.mime_type or ""
        else:
            return [], []
        app = self._app
        assert app is not None
        try:
            file = await self._call("getFile", message.chat.id, lambda: app.bot.get_file(file_id))
            data = bytes(await file.download_as_bytearray())
        except Exception as exc:
            log.warning(
                "telegram: could not download an image in chat %s: %s",
                message.chat.id,
                self._redactor.redact(str(exc)),
            )
            return [], ["[image could not be downloaded]"]
        if len(data) > cap:
            return [], [image_too_large(cap, len(data))]
        media_type = _sniff_image_type(data) or declared
        if media_type not in _IMAGE_TYPES:
            return [], [f"[image format not supported: {media_type or 'unknown'}]"]
        return [Image(media_type, data)], []

    # -- sending --------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as Telegram HTML, chunked, in order for this chat.

        Raises `TelegramDeliveryError` when Telegram refuses or stays unreachable.
        """
        if not out.text.strip():
            return
        await self._send_chunks(out.chat, split_markdown(out.text, self._opt.chunk_limit), True)

    async def _send_chunks(self, chat: ChatRef, chunks: Sequence[str], quote_first: bool) -> None:
        async with self._chat_lock(chat):
            for index, chunk in enumerate(chunks):
                if chunk.strip():
                    await self._post(chat, chunk, quote=quote_first and index == 0, retry=True)

    @contextlib.asynccontextmanager
    async def _chat_lock(self, chat: ChatRef) -> AsyncIterator[None]:
        key = f"{chat.chat_id}/{chat.thread_id}"
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def _bot_app(self) -> Application[Any, Any, Any, Any, Any, Any]:
        if self._app is None:
            raise TelegramDeliveryError(
                "the Telegram channel is not running (start() was not called or stop() was)"
            )
        return self._app

    async def _post(self, chat: ChatRef, markdown: str, *, quote: bool, retry: bool) -> int:
        """Send one chunk as HTML (plain text if Telegram can't parse it); return its id."""
        bot = self._bot_app().bot
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
                )
                try:
                    return await self._call("sendMessage", chat_id, request, retry=retry)
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
            request = functools.partial(bot.send_message, chat_id, text, parse_mode=parse_mode)
            return await self._call("sendMessage", chat_id, request, retry=retry)

        try:
            try:
                sent = await attempt(render_telegram_html(markdown), ParseMode.HTML)
            except BadRequest as exc:
                if not _is_parse_error(exc):
                    raise
                log.info("telegram: HTML refused in chat %s (%s); sending plain text", chat_id, exc)
                sent = await attempt(render_plain(markdown), None)
        except TelegramError as exc:
            raise self._delivery_error("send a message to", chat_id, exc) from None
        return sent.message_id

    async def _edit(self, chat: ChatRef, message_id: int, markdown: str, *, retry: bool) -> None:
        """Replace the text of one of our messages; "not modified" counts as done."""
        bot = self._bot_app().bot

        async def attempt(text: str, parse_mode: str | None) -> None:
            try:
                await self._call(
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
            if not _is_parse_error(exc):
                raise
            log.info("telegram: HTML refused in chat %s (%s); editing as plain", chat.chat_id, exc)
            await attempt(render_plain(markdown), None)

    async def _delete(self, chat: ChatRef, message_id: int) -> None:
        bot = self._bot_app().bot
        await self._call(
            "deleteMessage",
            chat.chat_id,
            lambda: bot.delete_message(chat.chat_id, message_id),
            retry=True,
        )

    async def _call(
        self,
        what: str,
        chat_id: int | str,
        op: Callable[[], Awaitable[T]],
        *,
        retry: bool = True,
    ) -> T:
        """Run one Bot API call, waiting out flood limits and retrying network errors."""
        attempts = self._opt.send_attempts if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                return await op()
            except RetryAfter as exc:
                wait = _retry_after_seconds(exc)
                if attempt == attempts or wait > MAX_RETRY_AFTER:
                    raise
                log.info(
                    "telegram: %s in chat %s rate limited; waiting %.1f s", what, chat_id, wait
                )
                await asyncio.sleep(wait)
            except (BadRequest, Forbidden, InvalidToken, ChatMigrated, Conflict):
                raise
            except NetworkError as exc:
                if attempt == attempts:
                    raise
                delay = self._opt.retry_backoff * 2 ** (attempt - 1) * random.uniform(1.0, 1.2)
                log.warning(
                    "telegram: %s in chat %s failed (%s); retry %d/%d in %.1f s",
                    what,
                    chat_id,
                    self._describe(exc),
                    attempt,
                    attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delivery_error(
        self, action: str, chat_id: int | str, exc: TelegramError
    ) -> TelegramDeliveryError:
        if isinstance(exc, Forbidden):
            hint = "the bot was blocked by the user or removed from the chat"
        elif isinstance(exc, RetryAfter):
            hint = f"Telegram's flood limit asks to wait {_retry_after_seconds(exc):.0f} s"
        elif isinstance(exc, BadRequest):
            hint = "Telegram refused the request"
        elif isinstance(exc, NetworkError):
            hint = f"Telegram stayed unreachable after {self._opt.send_attempts} attempts"
        else:
            hint = "Telegram returned an error"
        reason = self._redactor.redact(str(exc))
        retry_after = _retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None
        return TelegramDeliveryError(
            f"could not {action} Telegram chat {chat_id}: {hint} ({reason})", retry_after
        )

    # -- typing and streaming -------------------------------------------------------------

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """Show "typing…" in the chat (and topic) until the block exits."""
        thread = int(chat.thread_id) if chat.thread_id else None

        async def start() -> None:
            bot = self._bot_app().bot
            await bot.send_chat_action(chat.chat_id, ChatAction.TYPING, message_thread_id=thread)

        return keep_typing(start, None, self._opt.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        if self._opt.streaming == "off":
            return FinalOnlyStream(self.send, chat)
        return TelegramReplyStream(self, chat)


def _is_parse_error(exc: BadRequest) -> bool:
    return "can't parse entities" in str(exc).lower()


class TelegramReplyStream:
    """One preview message, edited at most every `stream_interval` s, finalised in place."""

    def __init__(self, channel: TelegramChannel, chat: ChatRef) -> None:
        self._channel = channel
        self._chat = chat
        self._interval = channel._opt.stream_interval
        self._limit = channel._opt.chunk_limit
        self._latest = ""
        self._shown = ""
        self._message_id: int | None = None
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._not_before = 0.0

    async def update(self, text: str) -> None:
        if self._closed.is_set() or not text.strip():
            return
        self._latest = text
        self._wake.set()
        if self._worker is None:
            self._worker = self._channel._spawn(self._run(), "telegram-preview")

    async def finish(self, text: str) -> None:
        await self._close()
        message_id = self._message_id
        if not text.strip():
            if message_id is not None:
                with contextlib.suppress(TelegramError):
                    await self._channel._delete(self._chat, message_id)
            return
        chunks = split_markdown(text, self._limit)
        if message_id is None:
            await self._channel._send_chunks(self._chat, chunks, True)
            return
        try:
            # A preview that already shows the first chunk needs no edit (Telegram would
            # refuse it as "not modified"): one Bot API call less for most short replies.
            if split_markdown(self._shown, self._limit)[:1] != chunks[:1]:
                await self._channel._edit(self._chat, message_id, chunks[0], retry=True)
        except BadRequest as exc:
            if "not found" not in str(exc).lower():
                raise self._channel._delivery_error(
                    "edit a message in", self._chat.chat_id, exc
                ) from None
            await self._channel._send_chunks(self._chat, chunks[:1], False)
        except TelegramError as exc:
            raise self._channel._delivery_error(
                "edit a message in", self._chat.chat_id, exc
            ) from None
        if len(chunks) > 1:
            await self._channel._send_chunks(self._chat, chunks[1:], False)

    async def abort(self) -> None:
        await self._close()

    async def _close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._worker is not None:
            await asyncio.wait([self._worker])  # never raises, even if stop() cancelled it

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._closed.is_set():
                return
            self._wake.clear()
            text = self._latest
            if text != self._shown:
                await self._show(text)
            delay = max(self._interval, self._not_before - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), delay)
            if self._closed.is_set():
                return

    async def _show(self, text: str) -> None:
        preview = split_markdown(text, self._limit)[:1]
        if not preview:
            return
        try:
            if self._message_id is None:
                self._message_id = await self._channel._post(
                    self._chat, preview[0], quote=True, retry=False
                )
            else:
                await self._channel._edit(self._chat, self._message_id, preview[0], retry=False)
            self._shown = text
        except RetryAfter as exc:
            self._not_before = time.monotonic() + _retry_after_seconds(exc)
        except TelegramDeliveryError as exc:
            if exc.retry_after is not None:
                self._not_before = time.monotonic() + exc.retry_after
            log.debug("telegram: preview failed in chat %s: %s", self._chat.chat_id, exc)
        except TelegramError as exc:
            log.debug(
                "telegram: preview edit failed in chat %s: %s",
                self._chat.chat_id,
                self._channel._describe(exc),
            )
