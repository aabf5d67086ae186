"""Slack events to `Inbound`: `message`/`app_mention` events and the slash command are
filtered, deduplicated and normalised, their images, voice clips and documents downloaded and
sender names looked up,
and handed on in arrival order per chat.

Decisions:
- A channel message that mentions the bot arrives as both `message` and `app_mention`; the
  first one seen (by channel and ts) is handled, the other dropped. Messages from any bot
  (`bot_id`), the bot's own user, edits, deletions and joins are ignored.
- `ChatRef.thread_id` is the Slack thread the message sits in (`thread_ts`), None for
  top-level messages, except that a top-level channel message addressed to the bot gets its
  own ts: the answer opens a thread under it, and follow-ups there share its session.
  `reply_to` is the message ts. Messages in a thread the bot posted in count as mentions; so
  do replies under a bot message (`parent_user_id`).
- Images are downloaded with the bot token, which is only ever sent to slack.com hosts or to
  the configured `base_url` host.
- Slack's ack waits for the handler (the daemon writes the message to its inbox there) for up
  to `ACK_WITHIN` seconds, in both modes (listeners run before the ack): an instance killed
  before that never acknowledged the event, so Slack sends it again (to another instance
  behind a load balancer) and the inbox keeps the first copy. Past that bound the ack goes
  anyway, inside Slack's 3 s limit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import (
    Attachment,
    ChatKind,
    ChatRef,
    Image,
    Inbound,
    InboundHandler,
    image_too_large,
)
from channels.slack.options import SlackOptions
from channels.slack.text import normalise_slack_text, slack_error_code

# One logger for the whole Slack adapter: log settings and records keep naming channels.slack.
log = logging.getLogger("channels.slack")

# Message subtypes that carry something a person wrote; everything else (edits, deletions,
# joins, topic changes, bot messages) is ignored.
_ACCEPTED_SUBTYPES: frozenset[str | None] = frozenset({None, "file_share", "thread_broadcast"})
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_SEEN_LIMIT = 2048
ACK_WITHIN = 2.0  # seconds Slack's ack may wait for the message to be handed on
_NAME_LIMIT = 10_000


@dataclass(slots=True)
class _Arrival:
    """The part of an event decided at once (before any download or lookup)."""

    chat: ChatRef
    sender_id: str
    text: str
    message_id: str
    mentioned: bool
    files: list[dict[str, Any]]
    sender_name: str = ""


class SlackInbound:
    """The receiving side of one Slack app: bolt's listeners for events and the slash command.

    Events are dropped until `identify` (after auth.test) and while no handler is set.
    """

    def __init__(
        self,
        name: str,
        options: SlackOptions,
        client: AsyncWebClient,
        *,
        is_bot_thread: Callable[[str, str], bool],
        spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]],
    ) -> None:
        self.name = name
        self._options = options
        self._client = client
        self._is_bot_thread = is_bot_thread
        self._spawn = spawn
        self.account = ""
        self._bot_user_id = ""
        self._bot_name = ""
        self._on_message: InboundHandler | None = None
        self._seen: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._inbound_tail: dict[str, asyncio.Future[None]] = {}
        self._names: dict[str, str] = {}
        self._names_enabled = True

    def set_handler(self, on_message: InboundHandler | None) -> None:
        """Hand each `Inbound` to `on_message` from now on; None drops events (after stop)."""
        self._on_message = on_message

    @property
    def handler(self) -> InboundHandler | None:
        """Where `Inbound`s go now (None before start and after stop)."""
        return self._on_message

    def identify(self, bot_user_id: str, bot_name: str, account: str) -> None:
        """Who the bot is, from auth.test: its user id and name, and the workspace team id."""
        self._bot_user_id = bot_user_id
        self._bot_name = bot_name
        self.account = account

    async def on_message_event(self, event: dict[str, Any]) -> None:
        await _handed_on(self._accept(event, via_mention=False))

    async def on_mention_event(self, event: dict[str, Any]) -> None:
        await _handed_on(self._accept(event, via_mention=True))

    async def on_other_event(self, event: dict[str, Any]) -> None:
        log.debug("slack: %s event ignored", event.get("type"))

    async def on_slash_command(
        self, ack: Callable[[], Awaitable[Any]], command: dict[str, Any]
    ) -> None:
        await ack()
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        if not channel or not user or self._on_message is None:
            return
        text, _ = normalise_slack_text(
            str(command.get("text") or ""), self._bot_user_id, self._bot_name
        )
        private = channel.startswith("D") or command.get("channel_name") == "directmessage"
        kind: ChatKind = "dm" if private else "group"
        arrival = _Arrival(
            chat=ChatRef(self.name, self.account, kind, channel),
            sender_id=user,
            text=text,
            message_id=f"slash:{command.get('trigger_id') or time.time_ns()}",
            mentioned=True,
            files=[],
            sender_name=str(command.get("user_name") or ""),
        )
        self._spawn(self._deliver(arrival), f"slack-slash-{channel}")

    def _accept(self, event: dict[str, Any], *, via_mention: bool) -> asyncio.Task[None] | None:
        """Decide at once whether an event becomes an Inbound; the rest runs in a task
        (returned, so the ack can wait for it)."""
        if self._on_message is None:
            return None
        if event.get("subtype") not in _ACCEPTED_SUBTYPES or event.get("hidden"):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not isinstance(user, str) or not isinstance(channel, str) or not isinstance(ts, str):
            return None
        if event.get("bot_id") or (self._bot_user_id and user == self._bot_user_id):
            return None
        if not self._bot_user_id:
            log.warning("slack: event in %s before auth.test succeeded; dropped", channel)
            return None
        key = (channel, ts)
        if key in self._seen:
            return None
        self._seen[key] = None
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)

        text, mentioned = normalise_slack_text(
            str(event.get("text") or ""), self._bot_user_id, self._bot_name
        )
        thread_ts = event.get("thread_ts")
        thread_id = thread_ts if isinstance(thread_ts, str) and thread_ts else None
        if thread_id is not None and thread_id != ts:
            in_bot_thread = self._is_bot_thread(channel, thread_id)
            if in_bot_thread or event.get("parent_user_id") == self._bot_user_id:
                mentioned = True
        channel_type = event.get("channel_type")
        private = channel_type == "im" or (channel_type is None and channel.startswith("D"))
        kind: ChatKind = "dm" if private else "group"
        if kind == "group" and thread_id is None and (mentioned or via_mention):
            # The answer opens a thread under this message: the conversation lives there.
            thread_id = ts
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        arrival = _Arrival(
            chat=ChatRef(self.name, self.account, kind, channel, thread_id, reply_to=ts),
            sender_id=user,
            text=text,
            message_id=ts,
            mentioned=mentioned or via_mention,
            files=files,
        )
        return self._spawn(self._deliver(arrival), f"slack-inbound-{channel}-{ts}")

    async def _deliver(self, arrival: _Arrival) -> None:
        # Files and names are fetched concurrently, but each chat's messages reach the
        # handler in arrival order (tasks start in creation order, so this runs first).
        chat_id = arrival.chat.chat_id
        previous = self._inbound_tail.get(chat_id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inbound_tail[chat_id] = done
        try:
            images, attachments, notes = await self._collect_files(arrival.files)
            name = arrival.sender_name or await self._sender_name(arrival.sender_id)
            text = "\n".join(part for part in (arrival.text, *notes) if part)
            if previous is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(previous)
            handler = self._on_message
            if handler is None:
                return
            await handler(
                Inbound(
                    chat=arrival.chat,
                    sender_id=arrival.sender_id,
                    text=text,
                    message_id=arrival.message_id,
                    sender_name=name,
                    mentioned=arrival.mentioned,
                    images=tuple(images),
                    attachments=tuple(attachments),
                )
            )
        finally:
            done.set_result(None)
            if self._inbound_tail.get(chat_id) is done:
                del self._inbound_tail[chat_id]

    async def _collect_files(
        self, files: list[dict[str, Any]]
    ) -> tuple[list[Image], list[Attachment], list[str]]:
        images: list[Image] = []
        attachments: list[Attachment] = []
        notes: list[str] = []
        cap = self._options.max_image_bytes
        for file in files:
            name = str(file.get("name") or file.get("title") or "file")
            mimetype = str(file.get("mimetype") or "")
            if not mimetype.startswith("image/"):
                attachments.append(await self._attachment(file, name, mimetype))
                continue
            if mimetype not in _IMAGE_TYPES:
                notes.append(f"[image type not supported: {mimetype}]")
                continue
            size = file.get("size")
            if isinstance(size, int) and size > cap:
                notes.append(image_too_large(cap, size))
                continue
            url = file.get("url_private") or file.get("url_private_download")
            if not isinstance(url, str) or not url:
                notes.append(f"[image {name} could not be downloaded: no url]")
                continue
            data, note = await self._download(url, cap)
            if data is None:
                notes.append(note)
            else:
                images.append(Image(mimetype, data))
        return images, attachments, notes

    async def _attachment(self, file: dict[str, Any], name: str, mimetype: str) -> Attachment:
        """A voice clip, audio file or document, downloaded within `max_file_bytes`."""
        cap = self._options.max_file_bytes
        size = file.get("size") if isinstance(file.get("size"), int) else None
        duration_ms = file.get("duration_ms")
        duration = duration_ms / 1000 if isinstance(duration_ms, int | float) else None
        kind: Literal["audio", "file"] = "audio" if mimetype.startswith("audio/") else "file"
        url = file.get("url_private_download") or file.get("url_private")
        data = None
        if isinstance(url, str) and url and (size is None or size <= cap):
            data, _ = await self._download(url, cap)
        return Attachment(kind, name, mimetype or "application/octet-stream", data, size, duration)

    async def _download(self, url: str, cap: int) -> tuple[bytes | None, str]:
        if not self._may_carry_token(url):
            log.warning(
                "slack: not sending the bot token to %s; image skipped", urlsplit(url).hostname
            )
            return None, "[image could not be downloaded: unexpected file host]"
        headers = {"Authorization": f"Bearer {self._options.bot_token}"}
        timeout = aiohttp.ClientTimeout(total=60)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status != 200:
                    return None, f"[image could not be downloaded: HTTP {response.status}]"
                if response.content_type.startswith("text/html"):
                    # Slack answers with its login page when the token lacks files:read.
                    return None, "[image could not be downloaded: add the files:read scope]"
                data = bytearray()
                async for block in response.content.iter_chunked(65536):
                    data.extend(block)
                    if len(data) > cap:
                        return None, image_too_large(cap)
                return bytes(data), ""
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: image download failed: %s", type(exc).__name__)
            return None, "[image could not be downloaded: network error]"

    def _may_carry_token(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
            return True
        base = urlsplit(self._options.base_url)
        return (parts.scheme, host, parts.port) == (
            base.scheme,
            (base.hostname or "").lower(),
            base.port,
        )

    async def _sender_name(self, user_id: str) -> str:
        if user_id in self._names or not self._names_enabled:
            return self._names.get(user_id, "")
        try:
            response = await self._client.users_info(user=user_id)
        except SlackApiError as exc:
            error = slack_error_code(exc)
            if error in ("missing_scope", "not_allowed_token_type", "invalid_auth"):
                self._names_enabled = False
                log.info("slack: sender names unavailable (%s); add the users:read scope", error)
            return ""
        except (aiohttp.ClientError, TimeoutError):
            return ""
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        name = str(
            profile.get("display_name")
            or profile.get("real_name")
            or user.get("real_name")
            or user.get("name")
            or ""
        )
        if len(self._names) >= _NAME_LIMIT:
            self._names.clear()
        self._names[user_id] = name
        return name


async def _handed_on(task: asyncio.Task[None] | None) -> None:
    """Until the message is handed on (or `ACK_WITHIN` passed); never cancels it."""
    if task is not None:
        await asyncio.wait({task}, timeout=ACK_WITHIN)
