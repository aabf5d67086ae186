"""What a channel plug-in declares: how to build its adapter and what the daemon may ask of it.

A `ChannelPlugin` names its config key, its options model (a `ChannelOptions` subclass that
the config loader validates `channels.<key>` with), a factory that imports and builds the
adapter only when the channel is enabled, its `Capabilities`, an optional `probe` for
`perch doctor`, what log redaction needs (token regexes, chatty library loggers), and
whether its current mode needs a single receiver across instances (`single_receiver`). The
daemon in `bot/` sees only these fields, never a platform's name.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from channels.base import Channel
from channels.options import ChannelOptions
from channels.state import ChannelState, MemoryState

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a platform can do, and how it wants replies written.

    `max_len` is the most one message may hold, measured in `length_unit` (Telegram and
    Signal count UTF-16 code units, so most emoji count twice). `chat_hint` is the line the
    system prompt gets about formatting when a run answers on this platform.
    `max_upload_bytes` is the largest file the bot may send (0: it cannot send files);
    `photos` says images can go as photos rather than documents. `voice_caption_chars` is
    the longest caption a voice note may carry (0: none; the text is sent on its own).
    """

    can_edit: bool = False
    can_type: bool = False
    can_react: bool = False
    max_upload_bytes: int = 0
    photos: bool = False
    voice_caption_chars: int = 0
    max_len: int = 4000
    length_unit: Literal["chars", "utf16"] = "chars"
    chat_hint: str = ""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What `perch doctor` prints for one channel: ok, what was found, and the fix if not."""

    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What the daemon hands a factory besides the options.

    `request_stop` asks the daemon to shut down (the console calls it at end of input when it
    is the only channel); `others` are the keys of the other enabled channels; `state_dir` is
    the daemon's state directory (beside the database), where a channel may keep files of its
    own (a crypto store, messages held for later), named after its key (None: the daemon has
    none to give); `state` keeps small values the channel must remember across restarts (a
    read cursor) in the daemon's store, shared by every instance.
    """

    request_stop: Callable[[], None] | None = None
    others: tuple[str, ...] = ()
    state_dir: Path | None = None
    state: ChannelState = field(default_factory=MemoryState)


Factory = Callable[[ChannelOptions, ChannelContext], Channel]
Probe = Callable[[ChannelOptions, "aiohttp.ClientSession"], Awaitable[ProbeResult]]


@dataclass(frozen=True, slots=True)
class ChannelPlugin:
    """One platform as the registry knows it (see the module docstring)."""

    key: str
    options: type[ChannelOptions]
    create: Factory
    capabilities: Capabilities = Capabilities()
    probe: Probe | None = None
    redact: tuple[re.Pattern[str], ...] = ()
    quiet_loggers: tuple[str, ...] = field(default=())
    # True if the channel, as configured, must receive on one instance only (a long poll
    # or a receive socket that two instances would fight over); the daemon then runs it
    # only while it leads the channel. Webhooks, HTTP endpoints etc. run everywhere.
    single_receiver: Callable[[ChannelOptions], bool] = field(default=lambda options: False)


async def probe_json(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, dict[str, object]]:
    """The status and JSON object a platform answered; `ProbeUnreachable` if none came."""
    import aiohttp

    try:
        async with http.request(method, url, **kwargs) as response:
            data = await response.json(content_type=None)
            status = response.status
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise ProbeUnreachable(type(exc).__name__) from None
    return status, data if isinstance(data, dict) else {}


class ProbeUnreachable(Exception):
    """A platform probe got no usable answer; the message names why."""
