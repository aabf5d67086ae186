"""The Matrix adapter: a matrix-nio `AsyncClient` syncing inside the daemon's loop.

Owns the connection (log in, the `/sync` loop, the encryption housekeeping between syncs,
status, stop) and wires the parts that do the rest: `login` (the device), `state` (what
outlives a restart), `inbound` (events to `Inbound`), `invites` (join or decline),
`delivery` (sending, typing, receipts), `stream` (previews by edits), `media` (attachments,
files, reactions), `render` (Markdown to Matrix HTML).

Decisions:
- `account` is the bot's user id (`@perch:example.org`).
- The `/sync` position is saved after each response whose events were all handed on, so a
  restart neither answers a message twice nor loses one sent while Perch was down. The first
  `/sync` after a start asks for the rooms' full state (members, encryption) with the saved
  position; a fresh account's first `/sync` hands on nothing (older history is not answered).
- Between syncs, as Element does: to-device messages out, one-time keys up, device lists
  queried, Olm sessions claimed, and the devices `device_trust` trusts marked (`trust.py`).
- A refused token or password stops retrying, with a status line saying what to fix; any
  other failure retries with backoff (1 s doubling to 60 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import aiohttp
import nio

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    FinalOnlyStream,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    ReplyStream,
)
from channels.matrix.delivery import MatrixDelivery, MatrixDeliveryError
from channels.matrix.inbound import MatrixInbound
from channels.matrix.invites import InviteHandler
from channels.matrix.login import LoginRefused, encryption_available, log_in
from channels.matrix.media import MatrixMedia
from channels.matrix.options import MatrixOptions
from channels.matrix.state import AccountState
from channels.matrix.stream import MatrixReplyStream
from channels.matrix.trust import DeviceTrust
from channels.reconnect import Backoff, connect_until_up

__all__ = ["MatrixChannel", "MatrixDeliveryError", "MatrixOptions"]

log = logging.getLogger("channels.matrix")

RETRY_CEILING = 60.0


class MatrixChannel:
    """A Matrix account as a Perch channel; its state lives under `state_root`."""

    name = "matrix"

    def __init__(self, options: MatrixOptions, state_root: Path) -> None:
        self._options = options
        self._state = AccountState(state_root, options.user_id)
        self._client: nio.AsyncClient | None = None
        self._invites: InviteHandler | None = None
        self._status = ChannelStatus(self.name, False, "not started")
        self._supervisor: asyncio.Task[None] | None = None
        self._first_sync = asyncio.Event()
        self._tasks = BackgroundTasks(log, "matrix")
        self._sync_done = asyncio.Condition()
        self.delivery = MatrixDelivery(options, lambda: self._client, self._next_sync)
        self.media = MatrixMedia(options, self.delivery)
        self._trust = DeviceTrust(options, self._state)
        self.inbound = MatrixInbound(
            options, self.delivery, self.media, self._is_direct, self._admits
        )
        if options.encryption and not encryption_available():
            log.error(
                "matrix: encryption is on but matrix-nio's e2e extra is not installed "
                "(pip install 'matrix-nio[e2e]'); encrypted rooms will not be answered"
            )

    @property
    def account(self) -> str:
        return self._options.user_id

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        """Log in and return once the first `/sync` is in, or after `connect_timeout` with
        status down while connecting goes on in the background."""
        if self._supervisor is not None:
            raise RuntimeError("the Matrix channel is already started; stop() it first")
        self.inbound.set_handler(on_message)
        self._first_sync.clear()
        self._set_status(False, f"connecting to {self._options.api_base}")
        self._supervisor = asyncio.create_task(self._supervise(), name="matrix-supervisor")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_sync.wait(), self._options.connect_timeout)
        if not self._first_sync.is_set():
            self._set_status(
                False,
                f"still connecting to {self._options.api_base} after "
                f"{self._options.connect_timeout:g}s; retrying in the background",
            )

    async def stop(self) -> None:
        """Stop syncing and cancel everything this channel started."""
        self.inbound.set_handler(None)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=5.0)
        await self._tasks.cancel_all(timeout=1.0)
        await self._close_client()
        self._status = ChannelStatus(self.name, False, "stopped")
        log.info("matrix: stopped")

    def status(self) -> ChannelStatus:
        return self._status

    async def _supervise(self) -> None:
        backoff = Backoff(1.0, RETRY_CEILING)
        while True:

            def failed(exc: Exception, delay: float) -> bool:
                self._set_status(False, self._describe(exc, delay))
                self._first_sync.set()  # start() need not wait while the server is away
                return not isinstance(exc, LoginRefused)

            client = await connect_until_up(self._log_in, backoff, on_failure=failed)
            if client is None:
                return
            try:
                await self._sync_loop(client, backoff)
            except LoginRefused as exc:
                self._set_status(False, str(exc))
                self._first_sync.set()
                return
            except (aiohttp.ClientError, OSError, TimeoutError, ConnectionError) as exc:
                self._set_status(False, self._describe(exc, backoff.current))
            except Exception as exc:  # a library surprise must not end receiving for good
                log.exception("matrix: the sync loop failed; reconnecting")
                self._set_status(False, self._describe(exc, backoff.current))
            finally:
                await self._close_client()
            self._first_sync.set()
            await asyncio.sleep(backoff.failed())

    async def _log_in(self) -> nio.AsyncClient:
        await self._close_client()
        client = await log_in(self._options, self._state)
        self._client = client
        invites = InviteHandler(self._options, client)
        self._invites = invites
        client.add_event_callback(self.inbound.on_message, nio.RoomMessage)
        client.add_event_callback(self._on_undecryptable, nio.MegolmEvent)
        client.add_event_callback(invites.on_invite, nio.InviteMemberEvent)
        if client.olm is not None:
            log.info(
                "matrix: device %s, session key %s (to verify the bot in Element: /verify %s %s %s)",
                client.device_id,
                client.olm.account.identity_keys["ed25519"],
                client.user_id,
                client.device_id,
                client.olm.account.identity_keys["ed25519"],
            )
        return client

    async def _sync_loop(self, client: nio.AsyncClient, backoff: Backoff) -> None:
        since = self._state.sync_token()
        self.inbound.catching_up = since is None
        first = True
        timeout_ms = int(self._options.sync_timeout * 1000)
        while True:
            response = await client.sync(
                timeout=0 if first else timeout_ms, since=since if first else None, full_state=first
            )
            if isinstance(response, nio.SyncError):
                if response.status_code in {"M_UNKNOWN_TOKEN", "M_FORBIDDEN"}:
                    raise LoginRefused(
                        f"the homeserver no longer accepts the bot's token ({response.status_code}); "
                        "give channels.matrix a fresh access_token or its password"
                    )
                raise ConnectionError(f"/sync failed: {response}")
            self._state.save_sync_token(response.next_batch)
            async with self._sync_done:
                self._sync_done.notify_all()
            if first:
                first = False
                self.inbound.catching_up = False
                backoff.reset()
                self._set_status(True, f"syncing as {client.user_id} (device {client.device_id})")
                self._first_sync.set()
            await self._keep_keys(client)

    async def _keep_keys(self, client: nio.AsyncClient) -> None:
        """The encryption housekeeping between two syncs (see the module docstring)."""
        if client.olm is None:
            return
        await client.send_to_device_messages()
        if client.should_upload_keys:
            await client.keys_upload()
        queried = client.should_query_keys
        if queried:
            await client.keys_query()
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())
        await self._trust.settle(client, fresh=queried)

    async def _on_undecryptable(self, room: nio.MatrixRoom, event: nio.MegolmEvent) -> None:
        client = self._client
        if client is None or client.olm is None:
            if not self.inbound.catching_up:
                self.inbound.note_encrypted_room(room.room_id)
            return
        await self.inbound.on_undecryptable(room, event)

    async def _next_sync(self) -> None:
        """Return after the next `/sync` response has been handled."""
        async with self._sync_done:
            await self._sync_done.wait()

    async def _admits(self, event: nio.Event) -> bool:
        client = self._client
        return client is not None and await self._trust.admits(client, event)

    def _is_direct(self, room_id: str) -> bool:
        return self._invites is not None and room_id in self._invites.direct_rooms

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2.0)

    def _set_status(self, up: bool, detail: str) -> None:
        previous = self._status
        self._status = ChannelStatus(self.name, up, detail)
        if previous.up == up and previous.detail == detail:
            return
        if up:
            log.info("matrix: %s", detail)
        else:
            log.warning("matrix is down: %s", detail)

    def _describe(self, exc: BaseException, delay: float) -> str:
        if isinstance(exc, LoginRefused):
            return str(exc)
        if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
            return (
                f"cannot reach {self._options.api_base} ({type(exc).__name__}); "
                f"retrying in {delay:g}s"
            )
        return f"{type(exc).__name__}: {exc}; retrying in {delay:g}s"

    # -- sending ---------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        await self.delivery.send(out)

    async def send_file(self, out: OutboundFile) -> None:
        await self.media.send_file(out)

    async def send_voice(self, out: OutboundVoice) -> None:
        await self.media.send_voice(out)

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        await self.media.react(chat, message_id, author, emoji, remove=remove)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return self.delivery.typing(chat)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        if self._options.streaming == "off":
            return FinalOnlyStream(self.send, chat)
        return MatrixReplyStream(self.delivery, chat, self._tasks.spawn)
