"""Signal adapter: signal-cli-rest-api in json-rpc mode, driven by a thin aiohttp client.

Owns the whole Signal lifecycle: the `/v1/about` mode check, the receive websocket
`/v1/receive/{number}` with its own reconnect loop and status, normalising envelopes to
`Inbound`, and delivery through `POST /v2/send` (chunked, styled, quoted in groups, retried).

Decisions, written down here because the platform leaves them open:
- signalbot is not used: its run loop stops the whole event loop on `stop()`, never
  reconnects after a clean websocket close and retries forever inside `wait_until_ready()`.
  The REST endpoints are few and plain, so this module talks to them directly.
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
import base64
import contextlib
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from channels.base import (
    ChannelStatus,
    ChatKind,
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
from channels.formatting import render_signal_text
from channels.typing import keep_typing

log = logging.getLogger(__name__)

OBJECT_REPLACEMENT = "\ufffc"  # the placeholder a Signal mention occupies in the text
SUPPORTED_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_STYLE_MARKERS = {"BOLD": "**", "ITALIC": "*", "MONOSPACE": "`", "STRIKETHROUGH": "~"}
_STYLED_MODE_CONTROL_CHARS = frozenset("*`~|\\")
_COMMAND_WITH_SUFFIX = re.compile(r"^/([A-Za-z0-9_]+)@\S+")
_BOT_MENTION_SENTINEL = "\x00"

_ABOUT_TIMEOUT = 5.0
_CONNECT_TIMEOUT = 10.0
_START_WAIT = 10.0
_SEND_TIMEOUT = 30.0
_SMALL_REQUEST_TIMEOUT = 10.0
_ATTACHMENT_TIMEOUT = 30.0
_WS_HEARTBEAT = 30.0
_WS_CLOSE_TIMEOUT = 1.0
_MAX_RETRY_AFTER = 120.0
_MAX_SEND_BACKOFF = 30.0
_GROUP_REFRESH_INTERVAL = 30.0
_REMEMBERED_SENT = 512
_MIN_VERSION = (0, 101, 0)


@dataclass(frozen=True, slots=True)
class SignalOptions:
    """Configuration of the Signal channel (the lead maps `channels.signal` onto it).

    `send_attempts` and `retry_initial` bound the retries of one send (429, 5xx, network
    errors); the rest are as in DESIGN section 10.
    """

    number: str
    service_url: str = "http://127.0.0.1:8080"
    typing_interval: float = 10.0
    max_image_bytes: int = 5_000_000
    chunk_limit: int = 4000
    reconnect_initial: float = 1.0
    reconnect_max: float = 60.0
    send_read_receipts: bool = False
    send_attempts: int = 5
    retry_initial: float = 0.5


class SignalApiError(Exception):
    """signal-cli-rest-api refused a request or could not be reached; `status` is the HTTP
    status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _NotReady(Exception):
    """The service answered, but not in a way we can receive from (detail in the message)."""


# --- pure helpers (public so tests and the gateway can rely on them) --------------------------


def format_message_id(author: str, timestamp: int) -> str:
    """The `Inbound.message_id` of a Signal message: its author and its sent timestamp."""
    return f"{author}:{timestamp}"


def parse_message_id(message_id: str | None) -> tuple[str, int] | None:
    """Inverse of `format_message_id`; None for anything that is not one."""
    if not message_id:
        return None
    author, sep, stamp = message_id.rpartition(":")
    if not sep or not author or not stamp.isdigit():
        return None
    return author, int(stamp)


def group_id_from_internal(internal_id: str) -> str:
    """The `group.<base64>` recipient id for a group's internal id (as signal-cli-rest-api
    derives it: base64 of the internal id's text)."""
    return "group." + base64.b64encode(internal_id.encode()).decode()


def _utf16_to_index(text: str) -> dict[int, int]:
    """Map UTF-16 offsets (Signal's unit for ranges) to Python string indices."""
    offsets: dict[int, int] = {}
    unit = 0
    for index, char in enumerate(text):
        offsets[unit] = index
        unit += 2 if ord(char) > 0xFFFF else 1
    offsets[unit] = len(text)
    return offsets


def _utf16_span(offsets: Mapping[int, int], start: Any, length: Any) -> tuple[int, int] | None:
    if not isinstance(start, int) or not isinstance(length, int) or start < 0 or length <= 0:
        return None
    begin = offsets.get(start)
    end = offsets.get(start + length)
    if begin is None or end is None or end <= begin:
        return None
    return begin, end


def to_styled_mode(text: str, styles: Sequence[str]) -> tuple[str, str]:
    """Turn plain text and signal-cli style ranges into a `/v2/send` message and `text_mode`.

    `styles` are `"start:length:STYLE"` in UTF-16 units, as `render_signal_text` returns them.
    Returns `(message, "styled")` with `**bold**`, `*italic*`, `` `mono` ``, `~strike~`
    markers, or `(text, "normal")` when styling would lose characters: the server's styled
    parser swallows every `*`, `` ` ``, `~`, `|` and has no reliable escape. Overlapping ranges
    keep the first; spoilers and unknown styles are dropped (the text stays).
    """
    if not styles or any(char in _STYLED_MODE_CONTROL_CHARS for char in text):
        return text, "normal"
    offsets = _utf16_to_index(text)
    ranges: list[tuple[int, int, str]] = []
    for spec in styles:
        parts = spec.split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        marker = _STYLE_MARKERS.get(parts[2].upper())
        span = _utf16_span(offsets, int(parts[0]), int(parts[1]))
        if marker is not None and span is not None:
            ranges.append((span[0], span[1], marker))
    ranges.sort()
    kept: list[tuple[int, int, str]] = []
    for start, end, marker in ranges:
        if kept and start < kept[-1][1]:
            continue
        if kept and marker == "*" and kept[-1][2] == "*" and kept[-1][1] == start:
            # "*a**b*" would read as a bold opener: merge touching italics instead
            kept[-1] = (kept[-1][0], end, marker)
            continue
        kept.append((start, end, marker))
    if not kept:
        return text, "normal"
    pieces: list[str] = []
    position = 0
    for start, end, marker in kept:
        pieces += [text[position:start], marker, text[start:end], marker]
        position = end
    pieces.append(text[position:])
    return "".join(pieces), "styled"


def strip_bot_mentions(
    text: str, mentions: Sequence[Mapping[str, Any]], is_bot: Callable[[Mapping[str, Any]], bool]
) -> tuple[str, bool]:
    """Resolve Signal mention ranges in `text`.

    The bot's own mentions are removed (with the space around them); other people's become
    `@name`. Returns the new text and whether the bot was mentioned. Ranges are UTF-16.
    """
    offsets = _utf16_to_index(text)
    spans: list[tuple[int, int, str]] = []
    mentioned = False
    for mention in mentions:
        if not isinstance(mention, Mapping):
            continue
        span = _utf16_span(offsets, mention.get("start"), mention.get("length"))
        if span is None:
            continue
        if is_bot(mention):
            mentioned = True
            spans.append((span[0], span[1], _BOT_MENTION_SENTINEL))
        else:
            label = mention.get("name") or mention.get("number") or mention.get("uuid") or "someone"
            spans.append((span[0], span[1], f"@{label}"))
    if not spans:
        return text, False
    result = text
    last_start = len(text) + 1
    for start, end, replacement in sorted(spans, reverse=True):
        if end > last_start:  # overlapping ranges: keep the later one only
            continue
        result = result[:start] + replacement + result[end:]
        last_start = start
    if mentioned:
        leading = result.lstrip().startswith(_BOT_MENTION_SENTINEL)
        result = re.sub(rf"[ \t]*{_BOT_MENTION_SENTINEL}[ \t]*", " ", result).strip()
        if leading:
            result = re.sub(r"^[,:;]\s*", "", result)
    return result, mentioned


def normalise_command(text: str) -> str:
    """`/cmd@anything rest` -> `/cmd rest` (Signal has no bot usernames, so any suffix is us)."""
    return _COMMAND_WITH_SUFFIX.sub(r"/\1", text, count=1)


def _json_or_none(raw: bytes) -> Any:
    """signal-cli-rest-api bodies are JSON, sometimes labelled text/plain."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _error_text(data: Any, raw_status: int) -> str:
    if isinstance(data, Mapping) and data.get("error"):
        return str(data["error"])[:300]
    return f"HTTP {raw_status}"


def _retry_after(headers: Mapping[str, str], data: Any) -> float | None:
    value: Any = headers.get("Retry-After")
    if value is None and isinstance(data, Mapping):
        value = data.get("retry_after") or data.get("retryAfterSeconds")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, min(seconds, _MAX_RETRY_AFTER))


def _sent_timestamps(data: Any) -> list[int]:
    """`/v2/send` answers `{"timestamp": "..."}` (or a list of those in some versions)."""
    items = data if isinstance(data, list) else [data]
    stamps: list[int] = []
    for item in items:
        if isinstance(item, Mapping):
            with contextlib.suppress(TypeError, ValueError):
                stamps.append(int(item.get("timestamp")))  # type: ignore[arg-type]
    return stamps


def _parse_version(text: Any) -> tuple[int, ...] | None:
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


# --- the channel ------------------------------------------------------------------------------


@dataclass(slots=True)
class _ChatLock:
    lock: asyncio.Lock
    users: int = 0


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
        service = URL(options.service_url)
        self._headers = (
            {"Authorization": aiohttp.encode_basic_auth(service.user, service.password or "")}
            if service.user
            else {}
        )
        self._base = str(service.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
        ws_scheme = "wss" if service.scheme == "https" else "ws"
        self._ws_base = ws_scheme + self._base[len(service.scheme) :]
        self._session: aiohttp.ClientSession | None = None
        self._on_message: InboundHandler | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._processor: asyncio.Task[None] | None = None
        self._incoming: asyncio.Queue[str] = asyncio.Queue()
        self._first_attempt = asyncio.Event()
        self._status = ChannelStatus(self.name, False, "not started")
        self._groups: dict[str, str] = {}
        self._groups_refreshed = 0.0
        self._self_uuid: str | None = None
        self._sent: deque[int] = deque(maxlen=_REMEMBERED_SENT)
        self._chat_locks: dict[str, _ChatLock] = {}
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
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT),
            headers=self._headers,
        )
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
        if self._session is not None:
            await self._session.close()
            self._session = None
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
        delay = self._options.reconnect_initial
        while True:
            ws = await self._try_connect(delay)
            if ws is not None:
                self._set_status(True, f"receiving for {self.account} from {self._base}")
                self._first_attempt.set()
                delay = self._options.reconnect_initial
                try:
                    ended = await self._read_websocket(ws)
                except Exception as exc:  # keep the loop alive whatever the socket does
                    ended = f"failed ({type(exc).__name__}: {exc})"
                finally:
                    await ws.close()
                self._set_status(False, f"receive websocket {ended}; reconnecting in {delay:g}s")
            self._first_attempt.set()
            await asyncio.sleep(delay)
            if ws is None:
                delay = min(delay * 2, self._options.reconnect_max)

    async def _try_connect(self, delay: float) -> aiohttp.ClientWebSocketResponse | None:
        """One connection attempt; on failure, status down with the reason and None."""
        try:
            await self._check_about()
            await self._refresh_groups()
            return await asyncio.wait_for(self._connect_websocket(), _CONNECT_TIMEOUT)
        except _NotReady as exc:
            reason = str(exc)
        except aiohttp.WSServerHandshakeError as exc:
            reason = (
                f"signal-cli-rest-api at {self._base} refused the receive websocket for "
                f"{self.account} (HTTP {exc.status}); is that number registered there?"
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            reason = (
                f"cannot reach signal-cli-rest-api at {self._base} "
                f"({type(exc).__name__}: {exc}); is it running?"
            )
        except Exception as exc:
            log.exception("unexpected error while connecting to signal-cli-rest-api")
            reason = f"unexpected error while connecting ({type(exc).__name__})"
        self._set_status(False, f"{reason}; retrying in {delay:g}s")
        return None

    async def _connect_websocket(self) -> aiohttp.ClientWebSocketResponse:
        session = self._require_session()
        return await session.ws_connect(
            f"{self._ws_base}/v1/receive/{self.account}",
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

    async def _check_about(self) -> None:
        try:
            status, data, _ = await self._request("GET", "/v1/about", seconds=_ABOUT_TIMEOUT)
        except SignalApiError as exc:
            raise _NotReady(
                f"cannot reach signal-cli-rest-api at {self._base} ({exc}); is it running?"
            ) from None
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

    async def _refresh_groups(self) -> None:
        """Best effort: map internal group ids to `group.<base64>` ids."""
        self._groups_refreshed = time.monotonic()
        try:
            status, data, _ = await self._request(
                "GET", f"/v1/groups/{self.account}", seconds=_SMALL_REQUEST_TIMEOUT
            )
        except SignalApiError as exc:
            log.debug("listing Signal groups failed: %s", exc)
            return
        if status != 200 or not isinstance(data, list):
            log.debug("listing Signal groups answered HTTP %s", status)
            return
        for entry in data:
            if isinstance(entry, Mapping) and entry.get("internal_id") and entry.get("id"):
                self._groups[str(entry["internal_id"])] = str(entry["id"])

    async def _group_chat_id(self, internal_id: str) -> str:
        known = self._groups.get(internal_id)
        if known is None and time.monotonic() - self._groups_refreshed > _GROUP_REFRESH_INTERVAL:
            await self._refresh_groups()
            known = self._groups.get(internal_id)
        return known or group_id_from_internal(internal_id)

    async def _process_incoming(self) -> None:
        while True:
            raw = await self._incoming.get()
            try:
                payload = json.loads(raw)
            except ValueError:
                log.warning("signal-cli-rest-api sent a frame that is not JSON; ignored")
                continue
            try:
                inbound = await self._normalise(payload)
                if inbound is None or self._on_message is None:
                    continue
                await self._maybe_send_read_receipt(inbound)
                await self._on_message(inbound)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("handling a Signal message failed; continuing with the next one")

    def _is_self(self, number: Any, uuid: Any) -> bool:
        if number and number == self.account:
            return True
        return bool(uuid) and uuid == self._self_uuid

    async def _normalise(self, payload: Any) -> Inbound | None:
        """An `Inbound` for a data message from someone else; None for everything else."""
        if not isinstance(payload, Mapping):
            return None
        if "envelope" not in payload:
            if payload.get("error"):
                log.warning(
                    "signal-cli-rest-api reported on the receive socket: %s", payload["error"]
                )
            return None
        account = payload.get("account")
        envelope = payload.get("envelope")
        if (account and account != self.account) or not isinstance(envelope, Mapping):
            return None
        number = envelope.get("sourceNumber")
        uuid = envelope.get("sourceUuid")
        source = envelope.get("source")
        if self._is_self(number or source, uuid):
            if uuid and self._self_uuid is None:
                self._self_uuid = str(uuid)
            return None
        data = envelope.get("dataMessage")
        if not isinstance(data, Mapping):  # sync, receipt, typing, edit, call, story
            return None
        if data.get("reaction") or data.get("remoteDelete"):
            return None
        text = data.get("message") or ""
        attachments = [a for a in data.get("attachments") or [] if isinstance(a, Mapping)]
        if not isinstance(text, str) or (not text and not attachments):
            return None
        sender = str(number or uuid or source or "")
        if not sender:
            return None
        timestamp = data.get("timestamp") or envelope.get("timestamp")
        if not isinstance(timestamp, int):
            return None

        group = data.get("groupInfo")
        if isinstance(group, Mapping) and group.get("groupId"):
            kind: ChatKind = "group"
            chat_id = await self._group_chat_id(str(group["groupId"]))
        else:
            kind, chat_id = "dm", sender

        mentions = [m for m in data.get("mentions") or [] if isinstance(m, Mapping)]
        text, mentioned = strip_bot_mentions(text, mentions, self._is_bot_mention)
        if self._quotes_bot(data.get("quote")):
            mentioned = True
        text = normalise_command(text)

        images, notes = await self._download_images(attachments)
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)

        message_id = format_message_id(sender, timestamp)
        return Inbound(
            chat=ChatRef(self.name, self.account, kind, chat_id, None, message_id),
            sender_id=sender,
            text=text,
            message_id=message_id,
            sender_name=str(envelope.get("sourceName") or ""),
            mentioned=mentioned,
            images=tuple(images),
        )

    def _is_bot_mention(self, mention: Mapping[str, Any]) -> bool:
        return self._is_self(mention.get("number") or mention.get("name"), mention.get("uuid"))

    def _quotes_bot(self, quote: Any) -> bool:
        if not isinstance(quote, Mapping):
            return False
        if self._is_self(quote.get("authorNumber") or quote.get("author"), quote.get("authorUuid")):
            return True
        return quote.get("id") in self._sent

    async def _download_images(
        self, attachments: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Image], list[str]]:
        images: list[Image] = []
        notes: list[str] = []
        limit = self._options.max_image_bytes
        for attachment in attachments:
            media_type = str(attachment.get("contentType") or "").lower()
            name = str(attachment.get("filename") or attachment.get("id") or "file")
            if not media_type.startswith("image/"):
                notes.append(f"[attachment not shown: {name} ({media_type or 'unknown type'})]")
                continue
            if media_type not in SUPPORTED_IMAGE_TYPES:
                notes.append(f"[image in unsupported format {media_type}: {name}]")
                continue
            size = attachment.get("size")
            if isinstance(size, int) and size > limit:
                notes.append(image_too_large(limit, size))
                continue
            attachment_id = attachment.get("id")
            if not attachment_id:
                notes.append(f"[image could not be downloaded: {name}]")
                continue
            try:
                data = await self._download(str(attachment_id), limit)
            except SignalApiError as exc:
                log.warning("downloading a Signal image failed: %s", exc)
                notes.append(f"[image could not be downloaded: {name}]")
                continue
            if data is None:
                notes.append(image_too_large(limit))
                continue
            images.append(Image(media_type, data))
        return images, notes

    async def _download(self, attachment_id: str, limit: int) -> bytes | None:
        """The attachment's bytes, or None when it is larger than `limit`."""
        session = self._require_session()
        url = f"{self._base}/v1/attachments/{attachment_id}"
        try:
            async with session.get(
                url, timeout=aiohttp.ClientTimeout(total=_ATTACHMENT_TIMEOUT)
            ) as resp:
                if resp.status != 200:
                    raise SignalApiError(
                        f"GET /v1/attachments/{attachment_id} answered HTTP {resp.status}",
                        resp.status,
                    )
                buffer = bytearray()
                async for block in resp.content.iter_chunked(64 * 1024):
                    buffer += block
                    if len(buffer) > limit:
                        return None
                return bytes(buffer)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SignalApiError(f"GET /v1/attachments/{attachment_id} failed: {exc}") from None

    async def _maybe_send_read_receipt(self, inbound: Inbound) -> None:
        if not self._options.send_read_receipts:
            return
        parsed = parse_message_id(inbound.message_id)
        if parsed is None:
            return
        try:
            await self._request(
                "POST",
                f"/v1/receipts/{self.account}",
                {"receipt_type": "read", "recipient": parsed[0], "timestamp": parsed[1]},
                seconds=_SMALL_REQUEST_TIMEOUT,
            )
        except SignalApiError as exc:
            log.debug("read receipt failed: %s", exc)

    # -- sending --

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown: chunked, styled where safe, the first chunk quoting the message it
        answers (groups only). Raises `SignalApiError` when it cannot be delivered."""
        self._require_session()  # not started is not worth retrying
        chunks = split_markdown(out.text, self._options.chunk_limit)
        quote = parse_message_id(out.chat.reply_to) if out.chat.is_group else None
        async with self._chat_turn(out.chat.chat_id):
            for chunk in chunks:
                plain, styles = render_signal_text(chunk)
                if not plain.strip():
                    continue
                await self._send_text(out.chat.chat_id, plain, styles, quote)
                quote = None

    async def _send_text(
        self, recipient: str, plain: str, styles: Sequence[str], quote: tuple[str, int] | None
    ) -> None:
        message, mode = to_styled_mode(plain, styles)
        body: dict[str, Any] = {
            "number": self.account,
            "recipients": [recipient],
            "message": message,
            "text_mode": mode,
        }
        if quote is not None:
            body["quote_author"], body["quote_timestamp"] = quote
        what = f"message to {recipient}"
        try:
            data = await self._post_with_retries("/v2/send", body, what)
        except SignalApiError as exc:
            if exc.status != 400 or (mode == "normal" and quote is None):
                raise
            log.warning("%s; sending it again as plain text without quote", exc)
            plain_body = {
                "number": self.account,
                "recipients": [recipient],
                "message": plain,
                "text_mode": "normal",
            }
            data = await self._post_with_retries("/v2/send", plain_body, what)
        self._sent.extend(_sent_timestamps(data))

    async def _post_with_retries(self, path: str, body: Mapping[str, Any], what: str) -> Any:
        attempts = max(1, self._options.send_attempts)
        delay = self._options.retry_initial
        problem = ""
        status: int | None = None
        for attempt in range(1, attempts + 1):
            try:
                status, data, headers = await self._request(
                    "POST", path, body, seconds=_SEND_TIMEOUT
                )
            except SignalApiError as exc:
                status, problem, wait = None, str(exc), delay
            else:
                if status < 300:
                    return data
                problem = f"HTTP {status}: {_error_text(data, status)}"
                if status == 429:
                    retry_after = _retry_after(headers, data)
                    wait = delay if retry_after is None else retry_after
                elif status >= 500:
                    wait = delay
                else:
                    raise SignalApiError(
                        f"signal-cli-rest-api refused the {what} ({problem})", status
                    )
            if attempt == attempts:
                break
            log.warning(
                "Signal %s not sent (%s); retry %d/%d in %.2fs",
                what,
                problem,
                attempt,
                attempts - 1,
                wait,
            )
            await asyncio.sleep(wait)
            delay = min(delay * 2, _MAX_SEND_BACKOFF)
        raise SignalApiError(
            f"could not deliver the Signal {what} after {attempts} attempts ({problem}); "
            f"check that signal-cli-rest-api at {self._base} is up",
            status,
        )

    @contextlib.asynccontextmanager
    async def _chat_turn(self, chat_id: str) -> AsyncIterator[None]:
        """Per-chat ordering without a global lock: one sender per chat at a time."""
        entry = self._chat_locks.get(chat_id)
        if entry is None:
            entry = self._chat_locks[chat_id] = _ChatLock(asyncio.Lock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._chat_locks.pop(chat_id, None)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """Typing indicator for `chat`, refreshed every `typing_interval` s, removed on exit."""
        path = f"/v1/typing-indicator/{self.account}"
        body = {"recipient": chat.chat_id}

        async def show() -> None:
            await self._expect_ok("PUT", path, body)

        async def hide() -> None:
            await self._expect_ok("DELETE", path, body)

        return keep_typing(show, hide, every=self._options.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return FinalOnlyStream(self.send, chat)

    async def react(self, chat: ChatRef, target_author: str, timestamp: int, emoji: str) -> None:
        """React with `emoji` to the message `(target_author, timestamp)` in `chat`."""
        await self._expect_ok(
            "POST",
            f"/v1/reactions/{self.account}",
            {
                "recipient": chat.chat_id,
                "reaction": emoji,
                "target_author": target_author,
                "timestamp": timestamp,
            },
        )

    # -- HTTP --

    def _require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise SignalApiError("the Signal channel is not started (call start() first)")
        return self._session

    async def _request(
        self, method: str, path: str, body: Any = None, *, seconds: float
    ) -> tuple[int, Any, Mapping[str, str]]:
        session = self._require_session()
        try:
            async with session.request(
                method,
                f"{self._base}{path}",
                json=body,
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as resp:
                raw = await resp.read()
                return resp.status, _json_or_none(raw), resp.headers
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise SignalApiError(f"{method} {path} failed: {reason}") from None

    async def _expect_ok(self, method: str, path: str, body: Any) -> None:
        status, data, _ = await self._request(method, path, body, seconds=_SMALL_REQUEST_TIMEOUT)
        if status >= 300:
            raise SignalApiError(
                f"{method} {path} answered HTTP {status}: {_error_text(data, status)}", status
            )
