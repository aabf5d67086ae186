"""The store's `ChannelStates` role on every backend: what channels keep across restarts.

Values are kept by channel and name, replaced in place, and still there after the store is
closed and opened again (what the email channel's IMAP cursor relies on).
"""

from __future__ import annotations

from bot.store.channel_state import StoreChannelState
from tests.store_backends import Backend


async def test_values_are_kept_by_channel_and_name_across_reopening(backend: Backend) -> None:
    store = await backend.open()
    try:
        assert await store.channel_state("email", "cursor") is None
        await store.set_channel_state("email", "cursor", "7:10")
        await store.set_channel_state("email", "cursor", "7:11")
        await store.set_channel_state("matrix", "cursor", "s123")
        assert await store.channel_state("email", "cursor") == "7:11"
        assert await store.channel_state("email", "other") is None
    finally:
        await store.close()
    store = await backend.open()
    try:
        email = StoreChannelState(store, "email")
        assert await email.load("cursor") == "7:11"
        await email.save("cursor", "7:12")
        assert await store.channel_state("email", "cursor") == "7:12"
        assert await StoreChannelState(store, "matrix").load("cursor") == "s123"
    finally:
        await store.close()
