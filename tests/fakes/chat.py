"""An in-process chat channel for gateway tests: push `Inbound`s in, read what was sent.

It is also a channel plug-in, the way a new platform would be one: `memory_plugin(key)`
declares its options model (`MemoryOptions`) and factory, so `channels.registry.register`
lets a config enable it by key. `MemoryChannel(name)` satisfies the `Channel` protocol. `say(...)` builds an `Inbound` and
awaits the gateway's handler; `sent` records every delivered text per chat; typing and
stream activity are recorded too, so tests can assert that typing stops and previews end.
`Inbox` is the other side, for a real platform adapter's tests: the handler it delivers to.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from channels.base import (
    Channel,
    ChannelStatus,
    ChatRef,
    Inbound,
    InboundHandler,
    Outbound,
    ReplyStream,
)
from channels.options import ChannelOptions, ChannelPolicy
from channels.plugin import Capabilities, ChannelContext, ChannelPlugin

_MESSAGE_IDS = itertools.count(1)  # platform ids never repeat, even across restarts


@dataclass
class Sent:
    chat: ChatRef
    text: str


@dataclass
class MemoryChannel:
    name: str = "telegram"
    account: str = "bot"
    sent: list[Sent] = field(default_factory=list)
    typing_active: int = 0
    typing_started: int = 0
    previews: list[str] = field(default_factory=list)
    hold: asyncio.Event | None = None  # when set here, every send waits for it (a slow platform)
    _handler: InboundHandler | None = None
    _changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def start(self, on_message: InboundHandler) -> None:
        self._handler = on_message

    async def stop(self) -> None:
        self._handler = None

    def status(self) -> ChannelStatus:
        return ChannelStatus(self.name, self._handler is not None, "memory")

    async def send(self, out: Outbound) -> None:
        if self.hold is not None:
            await self.hold.wait()
        self.sent.append(Sent(out.chat, out.text))
        async with self._cond():
            self._cond().notify_all()

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        self.typing_active += 1
        self.typing_started += 1
        try:
            yield
        finally:
            self.typing_active -= 1

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return _Stream(self, chat)

    # -- test side -------------------------------------------------------------------

    def chat(
        self, chat_id: str = "u1", *, group: bool = False, thread: str | None = None
    ) -> ChatRef:
        return ChatRef(self.name, self.account, "group" if group else "dm", chat_id, thread)

    def inbound(
        self,
        text: str,
        *,
        chat_id: str = "u1",
        sender: str | None = None,
        group: bool = False,
        mentioned: bool = True,
        message_id: str | None = None,
        thread: str | None = None,
    ) -> Inbound:
        return Inbound(
            chat=self.chat(chat_id, group=group, thread=thread),
            sender_id=sender or chat_id,
            sender_name=sender or chat_id,
            text=text,
            message_id=message_id or f"m{next(_MESSAGE_IDS)}",
            mentioned=mentioned,
        )

    async def say(self, text: str, **kwargs: object) -> Inbound:
        assert self._handler is not None, "channel not started"
        inbound = self.inbound(text, **kwargs)  # type: ignore[arg-type]
        await self._handler(inbound)
        return inbound

    async def deliver(self, inbound: Inbound) -> None:
        assert self._handler is not None, "channel not started"
        await self._handler(inbound)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [s.text for s in self.sent if chat_id is None or s.chat.chat_id == chat_id]

    async def wait_sent(self, n: int, timeout: float = 5.0) -> list[str]:
        async def enough() -> None:
            async with self._cond():
                await self._cond().wait_for(lambda: len(self.sent) >= n)

        await asyncio.wait_for(enough(), timeout)
        return self.texts()


class _Stream:
    interval = 0.0  # every update is recorded in `previews`

    def __init__(self, channel: MemoryChannel, chat: ChatRef) -> None:
        self._channel = channel
        self._chat = chat

    async def update(self, text: str) -> None:
        self._channel.previews.append(text)

    async def finish(self, text: str) -> None:
        if text.strip():  # empty: the preview is deleted, as on the platforms that edit
            await self._channel.send(Outbound(self._chat, text))

    async def abort(self) -> None:
        return None


class BrokenChannel(MemoryChannel):
    """A channel whose start() raises, as a broken adapter would."""

    async def start(self, on_message: InboundHandler) -> None:
        self._handler = on_message  # half-started: stop() must still be called
        raise RuntimeError("the adapter blew up while starting")


class MemoryOptions(ChannelPolicy):
    """`channels.<key>` of the memory plug-in: its access rules plus the account id."""

    account: str = "bot"
    broken: bool = False  # build a BrokenChannel (start-up clean-up tests)


def memory_plugin(key: str = "memory") -> ChannelPlugin:
    """The memory channel as a registrable plug-in under config key `key`."""

    def create(options: ChannelOptions, context: ChannelContext) -> Channel:
        assert isinstance(options, MemoryOptions)
        kind = BrokenChannel if options.broken else MemoryChannel
        return kind(key, options.account)

    return ChannelPlugin(
        key=key,
        options=MemoryOptions,
        create=create,
        capabilities=Capabilities(can_edit=True, can_type=True, chat_hint="You are in memory."),
    )


class Inbox:
    """The on_message handler: keeps what arrives and lets a test wait for it."""

    def __init__(self) -> None:
        self.items: list[Inbound] = []
        self._changed = asyncio.Condition()

    async def __call__(self, inbound: Inbound) -> None:
        async with self._changed:
            self.items.append(inbound)
            self._changed.notify_all()

    async def get(self, n: int = 1, timeout: float = 5.0) -> Inbound:
        """The n-th Inbound (1-based), waiting for it to arrive."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.items) >= n), timeout)
        return self.items[n - 1]
