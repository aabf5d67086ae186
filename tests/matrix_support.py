"""The other side of a Matrix conversation in tests: a person on the real Synapse.

`Person` is a matrix-nio client of its own (with its own crypto store when `encrypted`), syncing
in the background: it opens rooms, invites the bot, writes, and records what the bot's
messages show now (edits applied, encrypted ones decrypted), with their thread relations.
`wait(condition)` returns once the condition holds after some sync, or fails after a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nio
from nio.store import SqliteStore

from tests.matrix_server import MatrixUser, SynapseServer

ENCRYPTION = {
    "type": "m.room.encryption",
    "state_key": "",
    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
}


@dataclass(slots=True)
class Seen:
    """One of the bot's messages as the room shows it now."""

    event_id: str
    text: str
    relation: dict[str, Any] = field(default_factory=dict)
    encrypted: bool = False


class Person:
    """A Matrix user driven by the test (see the module docstring)."""

    def __init__(
        self, server: SynapseServer, user: MatrixUser, store: Path, *, encrypted: bool = False
    ) -> None:
        store.mkdir(parents=True, exist_ok=True)
        config = nio.AsyncClientConfig(
            store=SqliteStore,  # nio asks for a store class even with encryption off
            encryption_enabled=encrypted,
            store_sync_tokens=True,
        )
        self.user = user
        self.client = nio.AsyncClient(
            server.url, user.user_id, store_path=str(store), config=config
        )
        self.client.restore_login(user.user_id, user.device_id, user.access_token)
        self.shown: dict[str, list[Seen]] = {}  # room -> the bot's messages, in order
        self.undecryptable: list[str] = []
        self.reactions: dict[str, str] = {}  # the bot's reaction event -> "emoji on event"
        self.files: list[dict[str, Any]] = []  # the contents of the bot's file messages
        self.memberships: list[tuple[str, str, str]] = []  # (room, user, membership)
        self.invited: list[str] = []  # rooms this person was invited to
        self.typing: list[tuple[str, bool]] = []  # (room, whether the bot types), as it changed
        self.read: set[str] = set()  # events the bot marked read
        self._bot = ""
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Person:
        self.client.add_event_callback(self._on_text, nio.RoomMessageText)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_megolm, nio.MegolmEvent)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_reaction, nio.ReactionEvent)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_redaction, nio.RedactionEvent)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_file, nio.RoomMessageMedia)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_member, nio.RoomMemberEvent)  # type: ignore[arg-type]
        self.client.add_event_callback(self._on_invite, nio.InviteMemberEvent)  # type: ignore[arg-type]
        self.client.add_response_callback(self._on_sync, nio.SyncResponse)  # type: ignore[arg-type]
        self.client.add_ephemeral_callback(self._on_typing, nio.TypingNoticeEvent)  # type: ignore[arg-type]
        self.client.add_ephemeral_callback(self._on_receipt, nio.ReceiptEvent)  # type: ignore[arg-type]
        self._task = asyncio.create_task(self.client.sync_forever(timeout=500, full_state=True))
        await self.client.synced.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.client.close()

    def watch(self, bot_id: str) -> None:
        self._bot = bot_id

    async def wait(self, condition: Any, timeout: float = 30.0) -> None:
        """Return once `condition()` holds (checked after each sync and event)."""
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"condition not met within {timeout} s; shown: {self.shown}"
            ) from None

    # -- acting ----------------------------------------------------------------------------

    async def open_dm(self, bot_id: str, *, encrypted: bool) -> str:
        """A direct room with the bot, once the bot has joined it."""
        self.watch(bot_id)
        made = await self.client.room_create(
            is_direct=True,
            invite=[bot_id],
            preset=nio.RoomPreset.trusted_private_chat,
            initial_state=[ENCRYPTION] if encrypted else [],
        )
        assert isinstance(made, nio.RoomCreateResponse), made
        await self.wait(lambda: self.joined(made.room_id, bot_id))
        return made.room_id

    async def open_room(self, name: str, invite: list[str], *, encrypted: bool = False) -> str:
        made = await self.client.room_create(
            name=name, invite=invite, initial_state=[ENCRYPTION] if encrypted else []
        )
        assert isinstance(made, nio.RoomCreateResponse), made
        await self.wait(lambda: made.room_id in self.client.rooms)
        return made.room_id

    def joined(self, room_id: str, user_id: str) -> bool:
        """True once `user_id`'s join reached this client (nio lists the invited as users)."""
        return (room_id, user_id, "join") in self.memberships

    async def say(self, room_id: str, text: str, **extra: Any) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": text, **extra}
        sent = await self.client.room_send(
            room_id, "m.room.message", content, ignore_unverified_devices=True
        )
        assert isinstance(sent, nio.RoomSendResponse), sent
        return str(sent.event_id)

    async def join(self, room_id: str) -> None:
        joined = await self.client.join(room_id)
        assert isinstance(joined, nio.JoinResponse), joined

    def texts(self, room_id: str) -> list[str]:
        return [seen.text for seen in self.shown.get(room_id, [])]

    # -- callbacks -------------------------------------------------------------------------

    async def _on_text(self, room: nio.MatrixRoom, event: nio.RoomMessageText) -> None:
        if event.sender != self._bot:
            return
        content = event.source.get("content", {})
        relation = content.get("m.relates_to") or {}
        messages = self.shown.setdefault(room.room_id, [])
        if relation.get("rel_type") == "m.replace":
            new = content.get("m.new_content", {})
            for seen in messages:
                if seen.event_id == relation.get("event_id"):
                    seen.text = str(new.get("body", ""))
        else:
            messages.append(Seen(event.event_id, event.body, dict(relation), event.decrypted))
        self._changed.set()

    async def _on_reaction(self, room: nio.MatrixRoom, event: nio.ReactionEvent) -> None:
        if event.sender == self._bot:
            self.reactions[event.event_id] = f"{event.key} on {event.reacts_to}"
            self._changed.set()

    async def _on_redaction(self, room: nio.MatrixRoom, event: nio.RedactionEvent) -> None:
        if event.sender == self._bot:
            self.reactions.pop(event.redacts, None)
            self._changed.set()

    async def _on_file(self, room: nio.MatrixRoom, event: nio.RoomMessageMedia) -> None:
        if event.sender == self._bot:
            self.files.append(event.source.get("content", {}))
            self._changed.set()

    async def _on_member(self, room: nio.MatrixRoom, event: nio.RoomMemberEvent) -> None:
        self.memberships.append((room.room_id, event.state_key, event.membership))
        self._changed.set()

    async def _on_typing(self, room: nio.MatrixRoom, event: nio.TypingNoticeEvent) -> None:
        self.typing.append((room.room_id, self._bot in event.users))
        self._changed.set()

    async def _on_receipt(self, room: nio.MatrixRoom, event: nio.ReceiptEvent) -> None:
        self.read.update(r.event_id for r in event.receipts if r.user_id == self._bot)
        self._changed.set()

    async def _on_invite(self, room: nio.MatrixRoom, event: nio.InviteMemberEvent) -> None:
        if event.state_key == self.user.user_id and event.membership == "invite":
            self.invited.append(room.room_id)
            if event.sender == self._bot:
                await self.client.join(room.room_id)  # the bot's own invitation: accepted
            self._changed.set()

    async def upload(self, data: bytes, media_type: str, name: str) -> str:
        """Put a file in the media repository; its `mxc://` address."""
        uploaded, _ = await self.client.upload(
            io.BytesIO(data), content_type=media_type, filename=name, filesize=len(data)
        )
        assert isinstance(uploaded, nio.UploadResponse), uploaded
        return str(uploaded.content_uri)

    async def download(self, mxc: str) -> bytes:
        got = await self.client.download(mxc)
        assert isinstance(got, nio.MemoryDownloadResponse), got
        return bytes(got.body)

    async def _on_megolm(self, room: nio.MatrixRoom, event: nio.MegolmEvent) -> None:
        self.undecryptable.append(event.event_id)
        self._changed.set()

    async def _on_sync(self, response: nio.SyncResponse) -> None:
        if self.client.olm is not None:
            for device in self.client.device_store:
                if not device.verified:
                    self.client.verify_device(device)
        self._changed.set()
