"""Delivering to Matrix: `Outbound` Markdown as HTML messages in the right room and thread,
per-chat send order, edits and redactions for previews, typing and read receipts, and
`MatrixDeliveryError` saying why the homeserver refused.

Decisions:
- Where an answer goes: a DM to the room the user wrote from (remembered per user); a user
  the bot has no room with yet (a cron job, the `message` tool) gets the two-member room
  they share, else a new direct room the bot creates (encrypted when encryption is on) and
  invites them to; it is used once the next `/sync` brings it back. A group chat's
  answer goes to its room; with a `thread_id`, into that thread (`m.thread`, replying to
  the message that asked, so clients without threads show it as a reply).
- Chunks: `split_markdown` at `chunk_limit` (4,000 characters: one screen in Element; an
  event may hold 64 KiB, but long walls render badly), each rendered to Matrix HTML.
- Encrypted rooms: nio encrypts `m.room.message` (and edits) itself; reactions go
  unencrypted, as the spec has them. Keys are shared with every device in the room
  (`ignore_unverified_devices`): which devices Perch answers is decided on the way in.
- Rate limits: nio waits out `M_LIMIT_EXCEEDED` (429) with the server's `retry_after_ms`; a
  message still refused raises `MatrixDeliveryError`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import nio

from channels.base import ChatRef, Outbound
from channels.chunking import split_markdown
from channels.matrix.options import MatrixOptions
from channels.matrix.render import MatrixText, render_matrix
from channels.ordering import ChatLocks
from channels.typing import keep_typing

log = logging.getLogger("channels.matrix")

_REMEMBERED = 4096
_NEW_ROOM_WAIT = 15.0  # seconds for a room the bot made to come back in a /sync


class MatrixDeliveryError(RuntimeError):
    """The homeserver refused a message (after nio's retries); the text says why."""


def render_chunks(text: str, limit: int) -> list[MatrixText]:
    """`text` cut into Markdown chunks of at most `limit` characters, each rendered."""
    return [render_matrix(chunk) for chunk in split_markdown(text, limit) if chunk.strip()]


class MatrixDelivery:
    """The sending side of one account; `client()` is the logged-in client or None."""

    def __init__(
        self,
        options: MatrixOptions,
        client: Callable[[], nio.AsyncClient | None],
        synced: Callable[[], Awaitable[None]],
    ) -> None:
        self.options = options
        self._client = client
        self._synced = synced
        self._locks = ChatLocks()
        self._dm_rooms: dict[str, str] = {}
        self.bot_events: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.bot_threads: collections.OrderedDict[str, None] = collections.OrderedDict()

    # -- where messages go -----------------------------------------------------------------

    def remember_dm(self, user_id: str, room_id: str) -> None:
        self._dm_rooms[user_id] = room_id

    def remember_thread(self, event_id: str) -> None:
        _remember(self.bot_threads, event_id)

    def running(self) -> nio.AsyncClient:
        client = self._client()
        if client is None:
            raise MatrixDeliveryError("not connected to the homeserver")
        return client

    async def room_for(self, chat: ChatRef) -> str:
        """The room a chat's messages go to (a DM room made if the user has none)."""
        if chat.is_group:
            return chat.chat_id
        user = chat.chat_id
        known = self._dm_rooms.get(user)
        if known is not None:
            return known
        client = self.running()
        for room in client.rooms.values():
            if room.member_count == 2 and user in room.users:
                self._dm_rooms[user] = room.room_id
                return room.room_id
        made = await client.room_create(
            is_direct=True,
            invite=[user],
            initial_state=[_ENCRYPTION_STATE] if client.olm is not None else [],
        )
        if isinstance(made, nio.RoomCreateError):
            raise MatrixDeliveryError(f"could not open a direct room with {user}: {made}")
        with contextlib.suppress(TimeoutError):  # nio encrypts only for rooms a sync brought
            async with asyncio.timeout(_NEW_ROOM_WAIT):
                while made.room_id not in client.rooms:
                    await self._synced()
                if client.olm is not None:  # the invited person's devices, to share keys with
                    await client.joined_members(made.room_id)
                    while user not in client.olm.tracked_users:
                        if client.should_query_keys:
                            await client.keys_query()
                        else:
                            await self._synced()
        self._dm_rooms[user] = made.room_id
        return made.room_id

    def chat_lock(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return self._locks.hold((chat.chat_id, chat.thread_id))

    # -- posting ---------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        chunks = render_chunks(out.text, self.options.chunk_limit)
        if not chunks:
            return
        async with self.chat_lock(out.chat):
            await self.post_chunks(out.chat, chunks)

    async def post_chunks(self, chat: ChatRef, chunks: list[MatrixText]) -> None:
        for chunk in chunks:
            await self.post(chat, chunk)

    async def post(self, chat: ChatRef, text: MatrixText) -> str:
        """Post one rendered message; its event id."""
        content: dict[str, Any] = text.content()
        relation = _relation(chat)
        if relation is not None:
            content["m.relates_to"] = relation
        event_id = await self.room_send(await self.room_for(chat), "m.room.message", content)
        _remember(self.bot_events, event_id)
        return event_id

    async def edit(self, chat: ChatRef, event_id: str, text: MatrixText) -> None:
        """Replace a posted message's text (`m.replace`; the body says "* " as the spec asks
        for clients that do not apply edits)."""
        content: dict[str, Any] = {
            "msgtype": "m.text",
            "body": f"* {text.body}",
            "format": text.content()["format"],
            "formatted_body": f"* {text.html}",
            "m.new_content": text.content(),
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        await self.room_send(await self.room_for(chat), "m.room.message", content)

    async def delete(self, chat: ChatRef, event_id: str) -> None:
        client = self.running()
        done = await client.room_redact(await self.room_for(chat), event_id)
        if isinstance(done, nio.RoomRedactError):
            raise MatrixDeliveryError(f"could not remove message {event_id}: {done}")

    async def room_send(self, room_id: str, kind: str, content: dict[str, Any]) -> str:
        client = self.running()
        try:
            sent = await client.room_send(room_id, kind, content, ignore_unverified_devices=True)
        except nio.LocalProtocolError as exc:
            raise MatrixDeliveryError(f"cannot send to {room_id}: {exc}") from None
        if isinstance(sent, nio.RoomSendError):
            raise MatrixDeliveryError(f"the homeserver refused a message to {room_id}: {sent}")
        return str(sent.event_id)

    # -- presence in a chat ----------------------------------------------------------------

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        timeout_ms = int(self.options.typing_interval * 1000) + 10_000

        async def start() -> None:
            await self.running().room_typing(await self.room_for(chat), True, timeout_ms)

        async def stop() -> None:
            await self.running().room_typing(await self.room_for(chat), False)

        return keep_typing(start, stop, every=self.options.typing_interval)

    async def receipt(self, room_id: str, event_id: str) -> None:
        """Mark a message read (its read receipt and the room's read marker)."""
        client = self._client()
        if client is not None:
            await client.room_read_markers(room_id, event_id, event_id)


_ENCRYPTION_STATE = {
    "type": "m.room.encryption",
    "state_key": "",
    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
}


def _relation(chat: ChatRef) -> dict[str, Any] | None:
    if chat.thread_id is None:
        return None
    return {
        "rel_type": "m.thread",
        "event_id": chat.thread_id,
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": chat.reply_to or chat.thread_id},
    }


def _remember(seen: collections.OrderedDict[str, None], key: str) -> None:
    seen[key] = None
    while len(seen) > _REMEMBERED:
        seen.popitem(last=False)
