"""WhatsApp adapter: the official WhatsApp Business Cloud API, on aiohttp.

Owns the channel's lifecycle: the webhook server (`webhook`), the Graph API session (`api`),
turning events into `Inbound` (`inbound`), delivery (`delivery`) and the 24-hour window
(`window`), and the status `perch status` shows.

Decisions, written down here because the platform leaves them open:
- pywa is not used: its webhook runs inside Flask or FastAPI and its async client on httpx,
  while Perch serves and calls everything on aiohttp; the Cloud API calls Perch needs are
  five plain JSON endpoints.
- A webhook post is answered 200 once its messages are in the daemon's inbox (media are
  downloaded first, each within `media_timeout`), so an instance that dies before that never
  acknowledged them and Meta delivers them again; the inbox drops what it already has, and
  the adapter skips the download of a message id it handed on lately.
- The Cloud API cannot edit messages: `reply_stream` is `FinalOnlyStream`, one message per
  chunk. The read receipt and the typing indicator go out when a message arrives.
- Every chat is a DM (the Cloud API has no group chats for bots): `mentioned` is always true.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    FinalOnlyStream,
    Inbound,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    ReplyStream,
)
from channels.retry import RetryPolicy
from channels.typing import keep_typing
from channels.whatsapp.api import GraphApi, GraphError
from channels.whatsapp.delivery import WhatsAppSender
from channels.whatsapp.inbound import (
    RawMessage,
    RecentTexts,
    Status,
    WhatsAppNormaliser,
    read_events,
)
from channels.whatsapp.options import WhatsAppOptions
from channels.whatsapp.webhook import WebhookServer
from channels.whatsapp.window import HeldMessages, ServiceWindow

log = logging.getLogger("channels.whatsapp")


class WhatsAppChannel:
    """The WhatsApp adapter (see the module docstring). `account` is the phone number id."""

    name = "whatsapp"

    def __init__(self, options: WhatsAppOptions, state_dir: Path | None = None) -> None:
        self._opt = options
        self._api = GraphApi(
            options.api_base,
            options.phone_number_id,
            options.access_token,
            RetryPolicy(options.send_attempts, options.retry_initial, jitter=0.2),
        )
        held_file = (
            state_dir / f"whatsapp-held-{options.phone_number_id}.json" if state_dir else None
        )
        self._window = ServiceWindow()
        self._sender = WhatsAppSender(
            self._api, options, self._window, HeldMessages(held_file), self._refresh_status
        )
        self._recent = RecentTexts()
        self._handed_on = RecentTexts(2048)  # message ids already in the inbox
        self._normaliser = WhatsAppNormaliser(
            self._api,
            channel=self.name,
            account=options.phone_number_id,
            recent=self._recent,
            sent=self._sender.sent,
            max_image_bytes=options.max_image_bytes,
            max_file_bytes=options.max_file_bytes,
            media_timeout=options.media_timeout,
        )
        self._webhook = WebhookServer(options, self._on_event)
        self._tasks = BackgroundTasks(log, "WhatsApp")
        self._on_message: InboundHandler | None = None
        self._stopping = False
        self._up = False
        self._status = ChannelStatus(self.name, False, "not started")

    @property
    def account(self) -> str:
        return self._opt.phone_number_id

    @property
    def webhook_port(self) -> int:
        """The port the webhook listens on (the one bound, when the config says 0)."""
        return self._webhook.port

    # -- lifecycle --

    async def start(self, on_message: InboundHandler) -> None:
        self._on_message = on_message
        self._stopping = False
        self._api.open()
        try:
            await self._webhook.start()
        except OSError as exc:
            await self._api.close()
            raise RuntimeError(
                f"channels.whatsapp: cannot listen on {self._opt.webhook_listen}:"
                f"{self._opt.webhook_port} ({exc.strerror or exc}); change webhook_port"
            ) from None
        self._up = True
        self._refresh_status()
        log.info("whatsapp channel up: %s", self._status.detail)

    async def stop(self) -> None:
        self._stopping = True
        await self._webhook.stop()
        await self._tasks.cancel_all()
        await self._api.close()
        self._up = False
        self._refresh_status()

    def status(self) -> ChannelStatus:
        return self._status

    def _refresh_status(self) -> None:
        if not self._up:
            detail = "stopped" if self._stopping else "not started"
        else:
            where = f"{self._opt.webhook_listen}:{self._webhook.port}{self._opt.webhook_path}"
            detail = f"webhook on {where} for number id {self.account}"
        held = self._sender.held
        if len(held):
            detail += (
                f"; {len(held)} message(s) to {held.recipients()} person(s) held outside the "
                "24-hour window until they write"
            )
        self._status = ChannelStatus(self.name, self._up, detail)

    # -- receiving --

    async def _on_event(self, payload: Any) -> int:
        """A signed webhook body -> the HTTP status Meta gets."""
        if self._stopping or self._on_message is None:
            return 503  # Meta delivers it again later
        events = read_events(payload, self.account)
        for status in events.statuses:
            self._on_status(status)
        for raw in events.messages:
            try:
                await self._receive(raw)
            except Exception:
                log.exception("WhatsApp: handing a message on failed; Meta will deliver it again")
                return 500
        return 200

    async def _receive(self, raw: RawMessage) -> None:
        message_id = str(raw.data.get("id") or "")
        if message_id in self._handed_on:
            log.info("WhatsApp: message %s delivered again by Meta; already handed on", message_id)
            return
        inbound = await self._normaliser.normalise(raw)
        if inbound is None:
            return
        self._arrived(inbound)
        assert self._on_message is not None
        await self._on_message(inbound)
        self._handed_on.remember(message_id, "")

    def _arrived(self, inbound: Inbound) -> None:
        """The person wrote: their window opens; read receipt, typing, what was held."""
        self._window.opened(inbound.sender_id, inbound.received_at)
        if self._opt.read_receipts:
            self._tasks.spawn(self._read_and_type(inbound.message_id), "whatsapp-read")
        if len(self._sender.held):
            self._tasks.spawn(self._sender.release(inbound.sender_id), "whatsapp-release")

    async def _read_and_type(self, message_id: str) -> None:
        try:
            await self._sender.read_and_type(message_id)
        except GraphError as exc:
            log.debug("WhatsApp: read receipt failed: %s", exc)

    def _on_status(self, status: Status) -> None:
        if status.status != "failed":
            log.debug("WhatsApp: message %s %s", status.message_id, status.status)
            return
        if self._sender.failed(status.message_id, status.error_code):
            return
        log.warning(
            "WhatsApp: message %s to %s failed: %s [code %d]",
            status.message_id,
            status.recipient,
            status.error or "no reason given",
            status.error_code,
        )

    # -- sending --

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as WhatsApp text, in chunks; held outside the 24-hour window.
        Raises `GraphError` when it cannot be delivered."""
        await self._sender.send(out)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """WhatsApp's typing indicator hangs on the message being answered (`reply_to`);
        renewed every `typing_interval` s until the reply goes (no indicator without one)."""
        message_id = chat.reply_to

        async def show() -> None:
            if message_id:
                await self._sender.read_and_type(message_id)

        return keep_typing(show, every=self._opt.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return FinalOnlyStream(self.send, chat)

    async def send_file(self, out: OutboundFile) -> None:
        """Upload the file, then send it by media id (an image as a photo when asked)."""
        await self._sender.send_file(out)

    async def send_voice(self, out: OutboundVoice) -> None:
        """A spoken reply as a voice note (no caption: the text follows as a message)."""
        await self._sender.send_voice(out.chat.chat_id, out.data)

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        """React with `emoji` to `message_id`, or take the bot's reaction back."""
        await self._sender.react(chat.chat_id, message_id, "" if remove else emoji)
