"""What a channel keeps across restarts: `ChannelState`, a few small named values.

A platform whose own server does not remember how far the bot has read (an IMAP cursor, a
sync token) saves it here. The daemon hands each channel a `ChannelState` kept in its store
(`ChannelContext.state`); without one (tests, a channel built by hand) `MemoryState` keeps
the values for the life of the process. Names are the channel's own; values are short text.
"""

from __future__ import annotations

from typing import Protocol


class ChannelState(Protocol):
    async def load(self, name: str) -> str | None:
        """The value saved under `name`, or None."""
        ...

    async def save(self, name: str, value: str) -> None: ...


class MemoryState:
    """A `ChannelState` that lives as long as the process."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def load(self, name: str) -> str | None:
        return self.values.get(name)

    async def save(self, name: str, value: str) -> None:
        self.values[name] = value
