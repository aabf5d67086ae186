"""The seam between platforms and the daemon: `Inbound`, `Outbound` and the `Channel` protocol.

Adapters in `channels/` turn platform events into `Inbound` and deliver `Outbound`. They know
nothing of sessions, agents or policy: the gateway in `bot/` builds the session key from the
`ChatRef` fields (channel, account, chat kind, chat id, thread id) and decides what to answer.
How an adapter is found, configured and built is the plug-in seam: `channels.plugin` and
`channels.registry`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

ChatKind = Literal["dm", "group"]


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message came from and where its answer goes.

    `chat_id` is the platform's conversation id (Telegram chat id, Slack channel id, Signal
    phone number/uuid for DMs or group id for groups). `thread_id` is a Slack thread ts or a
    Telegram forum topic id. `reply_to` is the platform message id the answer should quote
    or thread under, if the platform does that.
    """

    channel: str
    account: str
    kind: ChatKind
    chat_id: str
    thread_id: str | None = None
    reply_to: str | None = None

    @property
    def is_group(self) -> bool:
        return self.kind == "group"


@dataclass(frozen=True, slots=True)
class Image:
    """An image sent to the bot, already downloaded and size-capped by the adapter."""

    media_type: str  # "image/jpeg", "image/png", "image/gif" or "image/webp"
    data: bytes


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent to the bot that is not an image the model looks at: a voice note or audio
    file (`kind="audio"`), or any other document (`kind="file"`).

    The adapter downloads it within its `max_file_bytes`; `data` is None when it did not
    (over that cap, or the download failed: `size` is the size the platform declared, if
    any). `duration_s` is the platform's figure for audio, when it gives one.
    """

    kind: Literal["audio", "file"]
    name: str
    media_type: str
    data: bytes | None
    size: int | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """A tap on a button of a `ChoiceCard`: the card's id and the option's value as the card
    gave them, the card's platform message id, and `token`, what the platform needs to answer
    the tap (Telegram's callback query id, Discord's interaction id and token; "" if none)."""

    card_id: str
    value: str
    message_id: str
    token: str = ""


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message from a platform, normalised.

    `mentioned` is true when the platform says the bot was addressed: an @mention, a reply
    to one of the bot's messages, or a message in a thread the bot takes part in. The
    bot's own mention is already stripped from `text`, and `/cmd@botname` is normalised to
    `/cmd`. Adapters drop the bot's own messages and edits before they get here.
    """

    chat: ChatRef
    sender_id: str
    text: str
    message_id: str
    sender_name: str = ""
    mentioned: bool = False
    images: tuple[Image, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    received_at: float = field(default_factory=time.time)
    # A tap on one of the bot's choice cards (`ChoiceSender`), not a message: `sender_id` is
    # who tapped, `chat` where the card is, `text` empty. The daemon never runs it as a turn.
    choice: Choice | None = None


@dataclass(frozen=True, slots=True)
class Outbound:
    """A reply in Markdown (CommonMark-ish, as Claude writes it); the adapter renders it."""

    chat: ChatRef
    text: str
    # A command's answer (/stop, /status, ...): it goes ahead of other chats' replies that
    # wait for a platform's overall pace, so a flood elsewhere never delays it.
    urgent: bool = False


InboundHandler = Callable[[Inbound], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class OutboundFile:
    """A file for a chat: sent as a photo when `as_photo` (the platform has photos and it is
    an image), else as a document; `caption` is plain text shown with it."""

    chat: ChatRef
    name: str
    media_type: str
    data: bytes
    caption: str = ""
    as_photo: bool = False


@dataclass(frozen=True, slots=True)
class OutboundVoice:
    """A spoken reply for a chat: `data` is OGG/Opus audio (48 kHz, mono) lasting
    `duration_s`; `caption` is plain text shown with it ("" for none), never longer than
    the platform's `Capabilities.voice_caption_chars`. `waveform` is its loudness over time
    (at most 256 levels 0-255), for platforms that draw one."""

    chat: ChatRef
    data: bytes
    duration_s: float
    caption: str = ""
    waveform: bytes = b""


class Refused(Exception):
    """The platform refused a file or reaction; the message says why, in the platform's words."""


@runtime_checkable
class FileSender(Protocol):
    """A channel that can send files (see `Capabilities.max_upload_bytes`)."""

    async def send_file(self, out: OutboundFile) -> None: ...


@dataclass(frozen=True, slots=True)
class ChoiceOption:
    """One button: `value` comes back in the `Choice` (short, no `:`), `label` is shown;
    `style` "danger" and "primary" colour it where the platform can."""

    value: str
    label: str
    style: Literal["default", "primary", "danger"] = "default"


@dataclass(frozen=True, slots=True)
class ChoiceCard:
    """A message with buttons (`card_id`: the daemon's id for it, short, no `:`); `text` is
    plain text."""

    chat: ChatRef
    card_id: str
    text: str
    options: tuple[ChoiceOption, ...]


@runtime_checkable
class ChoiceSender(Protocol):
    """A channel with buttons: it sends `ChoiceCard`s and reports taps as an `Inbound` whose
    `choice` is set. Channels without it get a text and typed commands instead.

    `send_choice` returns the card's platform message id. `answer_choice` answers a tap
    (`note`: a short text the tapper sees where the platform shows one; the platform needs an
    answer to stop its spinner). `settle_choice` replaces the card's text and removes its
    buttons (the decision, shown to everyone who sees the card)."""

    async def send_choice(self, card: ChoiceCard) -> str: ...

    async def answer_choice(self, chat: ChatRef, choice: Choice, note: str) -> None: ...

    async def settle_choice(self, chat: ChatRef, message_id: str, text: str) -> None: ...


@runtime_checkable
class VoiceSender(Protocol):
    """A channel that can send a voice note (a spoken reply the chat plays in place)."""

    async def send_voice(self, out: OutboundVoice) -> None: ...


@runtime_checkable
class Reactor(Protocol):
    """A channel that can react to a message (`author`: who wrote it, for platforms that
    address messages by author and time). `remove` takes the bot's `emoji` back off."""

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None: ...


def image_too_large(limit: int, size: int | None = None) -> str:
    """The note that takes an oversized image's place in the text (`size` None: unknown,
    found over the limit while downloading)."""
    shown = _megabytes(size) if size is not None else f"over {_megabytes(limit)}"
    return f"[image too large: {shown}, limit {_megabytes(limit)}]"


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f}".removesuffix(".0") + " MB"


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """What `perch status` and the log say about a channel."""

    name: str
    up: bool
    detail: str = ""


class ReplyStream(Protocol):
    """A reply being written while the model streams.

    Platforms that can edit messages show one preview message and edit it (at most once
    per `interval` seconds); others send only the final text and say `interval = math.inf`,
    so the daemon prepares no preview for them. The daemon hands `update` only text that is
    already cleaned for the user (see `bot.kernel.delivery`). `finish` delivers the final text
    (chunked as needed, in place of the preview where possible; empty text deletes the
    preview where the platform can); `abort` leaves whatever was already shown and sends
    nothing more.
    """

    interval: float

    async def update(self, text: str) -> None: ...

    async def finish(self, text: str) -> None: ...

    async def abort(self) -> None: ...


@runtime_checkable
class ShowsTools(Protocol):
    """A `ReplyStream` that can say which tool the agent is running, and how far it is when
    the tool reports progress (`fraction` 0..1, None when unknown; the console does)."""

    async def tool(self, name: str, fraction: float | None = None) -> None: ...


@runtime_checkable
class Terminal(Protocol):
    """A channel on the daemon's own terminal (the console): it shows the daemon's notices
    (what a first Ctrl-C waits for) and gives the terminal back before a hard exit."""

    def notice(self, text: str) -> None: ...

    def release(self) -> None: ...


@runtime_checkable
class Channel(Protocol):
    """A platform adapter. `start` connects and returns once receiving is running.

    `account` is the bot's own id on the platform (Telegram bot id, Slack team id, Signal
    number, "local" for the console): the account part of every `ChatRef` it makes.
    """

    name: str

    @property
    def account(self) -> str: ...

    async def start(self, on_message: InboundHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> None: ...

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]: ...

    def reply_stream(self, chat: ChatRef) -> ReplyStream: ...

    def status(self) -> ChannelStatus: ...


class FinalOnlyStream:
    """A `ReplyStream` for platforms without edits: only the final text is sent."""

    interval = math.inf  # no preview to prepare

    def __init__(self, send: Callable[[Outbound], Awaitable[None]], chat: ChatRef) -> None:
        self._send = send
        self._chat = chat

    async def update(self, text: str) -> None:
        return None

    async def finish(self, text: str) -> None:
        if text.strip():
            await self._send(Outbound(self._chat, text))

    async def abort(self) -> None:
        return None
