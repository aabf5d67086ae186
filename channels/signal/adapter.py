"""Signal adapter: signal-cli-rest-api in json-rpc mode, driven by a thin aiohttp client.

Owns the Signal channel's lifecycle: the `/v1/about` mode check, the receive websocket
`/v1/receive/{number}` with its own reconnect loop and status, typing and reactions. Envelopes
become `Inbound` in `inbound`, delivery through `POST /v2/send` (chunked, styled, quoted in
groups, retried) is `delivery`, HTTP is `api`, pure text rules `text`, settings `options`.

Decisions, written down here because the platform leaves them open:
- signalbot is not used: its run loop stops the whole event loop on `stop()`, never
  reconnects after a clean websocket close and retries forever inside `wait_until_ready()`.
  The REST endpoints are few and plain, so this adapter talks to them directly.
- Message ids are `"<author>:<timestamp>"` (Signal identifies a message by both); replies in
  groups quote the original through `quote_author`/`quote_timestamp`, DMs are not quoted.
- Group chats use the `group.<base64>` id that `/v2/send` wants (looked up in
  `GET /v1/groups/{number}`, computed the way signal-cli-rest-api does when the lookup misses).
- Styles: signal-cli-rest-api's "styled" text mode turns every `*`, `` ` ``, `~`, `|` into
  markup and has no escape in most versions, so styles are sent only when the rendered text
  holds none of those characters; otherwise the text goes out unstyled but intact. A 400 on a
  styled or quoting send is retried once as plain, unquoted text.
- Signal cannot edit messages, so `reply_stream` is always `FinalOnlyStream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp

from channels.base import (
    ChannelStatus,
    ChatRef,
    FinalOnlyStream,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    Refused,
    ReplyStream,
)
from channels.reconnect import Backoff, connect_until_up
from channels.signal.api import CONNECT_TIMEOUT, SignalApi, SignalApiError
from channels.signal.delivery import SignalSender
from channels.signal.inbound import SUPPORTED_IMAGE_TYPES, SignalNormaliser
from channels.signal.options import SignalOptions
from channels.signal.text import (
    OBJECT_REPLACEMENT,
    format_message_id,
    group_id_from_internal,
    normalise_command,
    parse_message_id,
    strip_bot_mentions,
    to_styled_mode,
)
from channels.typing import keep_typing

__all__ = [
    "OBJECT_REPLACEMENT",
    "SUPPORTED_IMAGE_TYPES",
    "SignalApiError",
    "SignalChannel",
    "SignalOptions",
    "format_message_id",
    "group_id_from_internal",
    "normalise_command",
    "parse_message_id",
    "strip_bot_mentions",
    "to_styled_mode",
]

log = logging.getLogger(__name__)

_ABOUT_TIMEOUT = 5.0
_START_WAIT = 10.0
_WS_HEARTBEAT = 30.0
_WS_CLOSE_TIMEOUT = 1.0
_MIN_VERSION = (0, 101, 0)


class _NotReady(Exception):
    """The service answered, but not in a way we can receive from (detail in the message)."""


def _parse_version(text: Any) -> tuple[int, ...] | None:
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


class SignalChannel:
    """The Signal adapter (see the module docstring). `account` is the bot's number."""

    name = "signal"

    def __init__(self, options: SignalOptions) -> None:
        if not options.number:
            raise ValueError(
                "channels.signal.number is empty: set it to the bot's registered number "
                "(E.164, e.g. +15551234567)"
            )
        self._options = options
        self._api = SignalApi(options.service_url)
        self._base = self._api.base
        self._on_message: InboundHandler | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._processor: asyncio.Task[None] | None = None
        self._incoming: asyncio.Queue[str] = asyncio.Queue()
        self._first_attempt = asyncio.Event()
        self._status = ChannelStatus(self.name, False, "not started")
        self._sender = SignalSender(
            self._api,
            options.number,
            chunk_limit=options.chunk_limit,
            send_attempts=options.send_attempts,
            retry_initial=options.retry_initial,
        )
        self._normaliser = SignalNormaliser(
            self._api,
            options.number,
            self._sender.sent,
            channel=self.name,
            max_image_bytes=options.max_image_bytes,
            max_file_bytes=options.max_file_bytes,
            send_read_receipts=options.send_read_receipts,
        )
        self._version_warned = False

    @property
    def account(self) -> str:
        return self._options.number

    # -- lifecycle --

    async def start(self, on_message: InboundHandler) -> None:
        """Connect and return once receiving runs, or after a bounded wait if the service is
        down (it keeps retrying in the background and `status()` says why)."""
        if self._supervisor is not None:
            raise RuntimeError("SignalChannel.start() called twice")
        self._on_message = on_message
        self._first_attempt = asyncio.Event()
        self._api.open()
        self._incoming = asyncio.Queue()
        self._set_status(False, f"connecting to {self._base}", logging.INFO)
        self._processor = asyncio.create_task(self._process_incoming(), name="signal-process")
        self._supervisor = asyncio.create_task(self._supervise(), name="signal-receive")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_attempt.wait(), _START_WAIT)

    async def stop(self) -> None:
        """Stop receiving and close the HTTP session; returns promptly, leaves no tasks."""
        tasks = [task for task in (self._supervisor, self._processor) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._supervisor = self._processor = None
        await self._api.close()
        self._set_status(False, "stopped", logging.INFO)

    def status(self) -> ChannelStatus:
        return self._status

    def _set_status(self, up: bool, detail: str, level: int | None = None) -> None:
        """Record the status and log changes: up at INFO, down at WARNING unless `level` says
        otherwise. Only the part of `detail` before ";" counts, so retries don't spam."""
        previous = self._status
        self._status = ChannelStatus(self.name, up, detail)
        if previous.up == up and previous.detail.split(";")[0] == detail.split(";")[0]:
            return
        if level is None:
            level = logging.INFO if up else logging.WARNING
        log.log(level, "signal channel %s: %s", "up" if up else "down", detail)

    # -- receiving --

    async def _supervise(self) -> None:
        """Connect, receive, and reconnect with backoff, for as long as the channel runs."""
        backoff = Backoff(self._options.reconnect_initial, self._options.reconnect_max)

        def failed(exc: Exception, delay: float) -> bool:
            self._set_status(False, f"{self._connect_problem(exc)}; retrying in {delay:g}s")
            return True

        while True:
            ws = await connect_until_up(
                self._connect_once, backoff, on_failure=failed, attempted=self._first_attempt
            )
            if ws is None:  # `failed` never gives up; here for the type checker
                return
            self._set_status(True, f"receiving for {self.account} from {self._base}")
            try:
                ended = await self._read_websocket(ws)
            except Exception as exc:  # keep the loop alive whatever the socket does
                ended = f"failed ({type(exc).__name__}: {exc})"
            finally:
                await ws.close()
            delay = backoff.current
            self._set_status(False, f"receive websocket {ended}; reconnecting in {delay:g}s")
            await asyncio.sleep(delay)

    async def _connect_once(self) -> aiohttp.ClientWebSocketResponse:
        """One connection attempt: the service's mode, the groups, the receive websocket."""
        await self._check_about()
        await self._normaliser.refresh_groups()
        return await asyncio.wait_for(self._connect_websocket(), CONNECT_TIMEOUT)

    def _connect_problem(self, exc: Exception) -> str:
        """Why a connection attempt failed, for the status line."""
        if isinstance(exc, _NotReady):
            return str(exc)
        if isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status >= 500:
            return self._temporarily_failing(exc.status, f"/v1/receive/{self.account}")
        if isinstance(exc, aiohttp.WSServerHandshakeError):
            return (
                f"signal-cli-rest-api at {self._base} refused the receive websocket for "
                f"{self.account} (HTTP {exc.status}); is that number registered there?"
            )
        if isinstance(exc, aiohttp.ClientError | TimeoutError | OSError):
            return (
                f"cannot reach signal-cli-rest-api at {self._base} "
                f"({type(exc).__name__}: {exc}); is it running?"
            )
        log.error("unexpected error while connecting to signal-cli-rest-api", exc_info=exc)
        return f"unexpected error while connecting ({type(exc).__name__})"

    async def _connect_websocket(self) -> aiohttp.ClientWebSocketResponse:
        session = self._api.require_session()
        return await session.ws_connect(
            f"{self._api.ws_base}/v1/receive/{self.account}",
            heartbeat=_WS_HEARTBEAT,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=_WS_CLOSE_TIMEOUT),
        )

    async def _read_websocket(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """Queue every text frame until the socket ends; return how it ended."""
        while True:
            message = await ws.receive()
            if message.type is aiohttp.WSMsgType.TEXT:
                self._incoming.put_nowait(message.data)
            elif message.type is aiohttp.WSMsgType.BINARY:
                self._incoming.put_nowait(message.data.decode("utf-8", "replace"))
            elif message.type is aiohttp.WSMsgType.ERROR:
                return f"failed ({ws.exception()!r})"
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING):
                return f"closed by the server (code {ws.close_code})"
            elif message.type is aiohttp.WSMsgType.CLOSED:
                return "dropped"

    def _temporarily_failing(self, status: int, path: str) -> str:
        """A 5xx: the service is up but failing for now (starting, restarting, overloaded)."""
        return (
            f"signal-cli-rest-api at {self._base} is failing for now (HTTP {status} on {path}), "
            "probably starting or restarting"
        )

    async def _check_about(self) -> None:
        try:
            status, data, _ = await self._api.request("GET", "/v1/about", seconds=_ABOUT_TIMEOUT)
        except SignalApiError as exc:
            raise _NotReady(
                f"cannot reach signal-cli-rest-api at {self._base} ({exc}); is it running?"
            ) from None
        if status >= 500:
            raise _NotReady(self._temporarily_failing(status, "/v1/about"))
        if status != 200 or not isinstance(data, Mapping):
            raise _NotReady(
                f"signal-cli-rest-api at {self._base} answered /v1/about with HTTP {status}; "
                "check channels.signal.service_url"
            )
        mode = data.get("mode")
        if mode != "json-rpc":
            raise _NotReady(
                f"signal-cli-rest-api at {self._base} runs in mode {mode!r}, but Perch receives "
                "over its json-rpc websocket: run the container with MODE=json-rpc"
            )
        version = _parse_version(data.get("version"))
        if version is not None and version < _MIN_VERSION and not self._version_warned:
            self._version_warned = True
            log.warning(
                "signal-cli-rest-api at %s is version %s; Perch is tested with 0.101.0 or newer",
                self._base,
                data.get("version"),
            )

    async def _process_incoming(self) -> None:
        while True:
            raw = await self._incoming.get()
            try:
                payload = json.loads(raw)
            except ValueError:
                log.warning("signal-cli-rest-api sent a frame that is not JSON; ignored")
                continue
            try:
                inbound = await self._normaliser.normalise(payload)
                if inbound is None or self._on_message is None:
                    continue
                await self._normaliser.maybe_send_read_receipt(inbound)
                await self._on_message(inbound)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("handling a Signal message failed; continuing with the next one")

    # -- sending --

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown: chunked, styled where safe, the first chunk quoting the message it
        answers (groups only). Raises `SignalApiError` when it cannot be delivered."""
        await self._sender.send(out)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """Typing indicator for `chat`, refreshed every `typing_interval` s, removed on exit."""
        path = f"/v1/typing-indicator/{self.account}"
        body = {"recipient": chat.chat_id}

        async def show() -> None:
            await self._api.expect_ok("PUT", path, body)

        async def hide() -> None:
            await self._api.expect_ok("DELETE", path, body)

        return keep_typing(show, hide, every=self._options.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return FinalOnlyStream(self.send, chat)

    async def send_file(self, out: OutboundFile) -> None:
        """An attachment (base64 in `/v2/send`), the caption as its text."""
        await self._sender.send_file(out)

    async def send_voice(self, out: OutboundVoice) -> None:
        """The voice note as an `audio/ogg` attachment (OGG/Opus plays in Signal's clients),
        the caption as its text. signal-cli-rest-api's `/v2/send` has no voice-note flag, so
        it shows as a playable audio attachment rather than a recorded-voice bubble."""
        file = OutboundFile(out.chat, "voice.ogg", "audio/ogg", out.data, out.caption)
        await self._sender.send_file(file)

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        """React with `emoji` to the message `message_id` ("<author>:<timestamp>") in `chat`,
        or take that reaction back (`remove`). Raises `Refused` when the service says no."""
        parsed = parse_message_id(message_id)
        if parsed is None:
            raise Refused(f"{message_id!r} is not a Signal message id")
        try:
            await self._api.expect_ok(
                "DELETE" if remove else "POST",
                f"/v1/reactions/{self.account}",
                {
                    "recipient": chat.chat_id,
                    "reaction": emoji,
                    "target_author": parsed[0],
                    "timestamp": parsed[1],
                },
            )
        except SignalApiError as exc:
            raise Refused(f"Signal: {exc}") from None
