"""The `ChannelState` each channel is given (`channels.state`), kept in the store.

A channel saves what it must remember across restarts (an IMAP cursor)
under names of its own; the store keeps them by channel key (`ChannelStates` role), so two
channels never see each other's values and a restart, or another instance taking the
channel over, finds them.
"""

from __future__ import annotations

from bot.store.roles import ChannelStates


class StoreChannelState:
    """One channel's values in the store."""

    def __init__(self, store: ChannelStates, channel: str) -> None:
        self._store = store
        self._channel = channel

    async def load(self, name: str) -> str | None:
        return await self._store.channel_state(self._channel, name)

    async def save(self, name: str, value: str) -> None:
        await self._store.set_channel_state(self._channel, name, value)
