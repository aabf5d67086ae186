"""The Discord adapter: a discord.py `Client` on the gateway, run inside the daemon's loop.

Owns the connection (log in, discover the gateway, connect; status; stop) and wires the parts
that do the rest: `inbound` (messages to `Inbound`), `interactions` (slash commands),
`choices` (cards with buttons, and their taps),
`delivery` (sending, typing, retries), `stream` (streamed previews), `media` (attachments,
files, reactions), `wire` (where the library sends its requests), `options`.

Decisions:
- Intents: guilds, guild messages, DMs and MESSAGE_CONTENT (privileged: switched on in the
  Developer Portal); no member list, no presences, no message cache.
- `account` is the bot's user id, read from the token (its first part) and confirmed by
  `GET /users/@me` at login.
- Drops: discord.py reconnects and RESUMEs on its own (Discord replays what was missed; a
  message seen twice is dropped). A session Discord cannot resume is identified afresh. The
  whole client is rebuilt with backoff when logging in or discovering the gateway fails;
  a refused token or a missing MESSAGE_CONTENT intent stops the retries, with a status
  line saying what to fix.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from contextlib import AbstractAsyncContextManager

import aiohttp
import discord

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    Choice,
    ChoiceCard,
    FinalOnlyStream,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    ReplyStream,
)
from channels.discord import wire
from channels.discord.choices import DiscordChoices
from channels.discord.delivery import DiscordDelivery, DiscordDeliveryError, render_chunks
from channels.discord.inbound import DiscordInbound
from channels.discord.interactions import SlashCommands
from channels.discord.media import DiscordMedia
from channels.discord.options import DiscordOptions
from channels.discord.stream import DiscordReplyStream
from channels.reconnect import Backoff, connect_until_up

__all__ = ["DiscordChannel", "DiscordDeliveryError", "DiscordOptions", "DiscordReplyStream"]

log = logging.getLogger("channels.discord")

RETRY_CEILING = 60.0
INTENTS = discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)


class _NoVoiceNotice(logging.Filter):
    """Drops discord.py's start-up warnings that voice support is missing (Perch has none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


logging.getLogger("discord.client").addFilter(_NoVoiceNotice())


class _Fatal(Exception):
    """A failure retrying cannot fix; the message says what to change."""


class _Client(discord.Client):
    """discord.py's client with its events routed to the channel."""

    def __init__(self, channel: DiscordChannel, options: DiscordOptions) -> None:
        super().__init__(
            intents=INTENTS,
            max_messages=None,
            chunk_guilds_at_startup=False,
            member_cache_flags=discord.MemberCacheFlags.none(),
            guild_ready_timeout=options.guild_ready_timeout,
            allowed_mentions=discord.AllowedMentions.none(),
            max_ratelimit_timeout=30.0,
        )
        self._channel = channel

    async def on_connect(self) -> None:
        self._channel.connected(resumed=False)

    async def on_resumed(self) -> None:
        self._channel.connected(resumed=True)

    async def on_disconnect(self) -> None:
        self._channel.disconnected()

    async def on_message(self, message: discord.Message) -> None:
        self._channel.inbound.accept(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        tap = await self._channel.choices.read_tap(interaction, self._channel.account)
        if tap is not None:
            await self._channel.inbound.hand_on(tap, f"tap:{interaction.id}")
            return
        await self._channel.commands.on_interaction(interaction)


class DiscordChannel:
    """A Discord bot as a Perch channel. `account` is the bot's user id."""

    name = "discord"

    def __init__(self, options: DiscordOptions) -> None:
        self._options = options
        wire.use_api_base(options.rest_base)
        self._client: _Client | None = None
        self._status = ChannelStatus(self.name, False, "not started")
        self._supervisor: asyncio.Task[None] | None = None
        self._first_attempt = asyncio.Event()
        self._tasks = BackgroundTasks(log, "discord")
        self._spawn = self._tasks.spawn
        self._registered = False
        self.delivery = DiscordDelivery(options, lambda: self._client)
        self.media = DiscordMedia(options, self.delivery)
        self.inbound = DiscordInbound(options, self.delivery, self.media, self._spawn)
        self.inbound.account = _user_id_in(options.token)
        self.commands = SlashCommands(options, self.delivery, self.inbound, self._spawn)
        self.choices = DiscordChoices(self.delivery)

    @property
    def account(self) -> str:
        return self.inbound.account

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        """Connect and return once the gateway is up, or after `connect_timeout` with status
        down while connecting goes on in the background. Never raises for an unreachable
        Discord."""
        if self._supervisor is not None:
            raise RuntimeError("the Discord channel is already started; stop() it first")
        self.inbound.set_handler(on_message)
        self._first_attempt.clear()
        self._set_status(False, f"connecting to {self._options.rest_base}")
        self._supervisor = asyncio.create_task(self._supervise(), name="discord-supervisor")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_attempt.wait(), self._options.connect_timeout)
        if not self._first_attempt.is_set():
            self._set_status(
                False,
                f"still connecting to Discord after {self._options.connect_timeout:g}s; "
                "retrying in the background",
            )

    async def stop(self) -> None:
        """Disconnect and cancel everything this channel started; returns within ~2 s."""
        self.inbound.set_handler(None)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=2.0)
        await self._tasks.cancel_all(timeout=1.0)
        await self._close_client()
        self._status = ChannelStatus(self.name, False, "stopped")
        log.info("discord: stopped")

    def status(self) -> ChannelStatus:
        return self._status

    def connected(self, *, resumed: bool) -> None:
        """The gateway session is up (READY or RESUMED arrived)."""
        user = self._client.user if self._client is not None else None
        self._set_status(True, f"connected as {user.name if user else '?'}")
        self._first_attempt.set()
        if not self._registered and self._client is not None:
            self._registered = True
            self._spawn(self.commands.register(self._client), "discord-register-commands")

    def disconnected(self) -> None:
        if self._supervisor is not None and self._status.up:
            self._set_status(False, "gateway connection lost; resuming")

    async def _supervise(self) -> None:
        backoff = Backoff(1.0, RETRY_CEILING)
        while True:

            def failed(exc: Exception, delay: float) -> bool:
                self._set_status(False, self._describe(exc, delay))
                self._first_attempt.set()  # start() need not wait while Discord is away
                return not isinstance(exc, _Fatal)

            client = await connect_until_up(
                self._log_in, backoff, on_failure=failed, attempted=None
            )
            if client is None:
                self._first_attempt.set()
                return
            try:
                await client.connect(reconnect=True)
            except discord.PrivilegedIntentsRequired:
                self._set_status(False, _INTENT_MISSING)
                self._first_attempt.set()
                return
            except discord.ConnectionClosed as exc:
                if exc.code == 4004:
                    self._set_status(False, _TOKEN_REFUSED)
                    self._first_attempt.set()
                    return
                self._set_status(
                    False, f"the gateway closed the session ({exc.code}); reconnecting"
                )
            except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
                self._set_status(False, self._describe(exc, backoff.current))
            finally:
                await self._close_client()
            self._first_attempt.set()
            await asyncio.sleep(backoff.failed())

    async def _log_in(self) -> _Client:
        """A logged-in client with the gateway discovered (`GET /users/@me`, `GET
        /oauth2/applications/@me`, `GET /gateway/bot`), or an exception."""
        await self._close_client()
        client = _Client(self, self._options)
        self._client = client
        try:
            await client.login(self._options.token)
            _, url, _ = await client.http.get_bot_gateway()
        except discord.LoginFailure:
            await self._close_client()
            raise _Fatal(_TOKEN_REFUSED) from None
        except BaseException:
            await self._close_client()
            raise
        wire.use_gateway(url)
        assert client.user is not None
        if str(client.user.id) != self.inbound.account:
            log.warning(
                "discord: the token names user %s but Discord says %s",
                self.inbound.account,
                client.user.id,
            )
            self.inbound.account = str(client.user.id)
        return client

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None and not client.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2.0)

    def _set_status(self, up: bool, detail: str) -> None:
        previous = self._status
        self._status = ChannelStatus(self.name, up, detail)
        if previous.up == up and previous.detail == detail:
            return
        if up:
            log.info("discord: %s", detail)
        else:
            log.warning("discord is down: %s", detail)

    def _describe(self, exc: BaseException, delay: float) -> str:
        if isinstance(exc, _Fatal):
            return str(exc)
        if isinstance(exc, discord.HTTPException):
            return f"Discord answered HTTP {exc.status} ({exc.text or exc.code}); retrying in {delay:g}s"
        if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError | discord.GatewayNotFound):
            return (
                f"cannot reach Discord at {self._options.rest_base} ({type(exc).__name__}); "
                f"retrying in {delay:g}s"
            )
        return f"{type(exc).__name__}: {exc}; retrying in {delay:g}s"

    # -- sending ---------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as Discord Markdown chunks, in order (a slash command's answer
        replaces its "thinking...")."""
        interaction = self.commands.take(out.chat)
        if interaction is not None and out.text.strip():
            chunks = render_chunks(out.text, self._options.chunk_limit)
            if await self.commands.answer(interaction, chunks):
                return
        await self.delivery.send(out)

    async def send_file(self, out: OutboundFile) -> None:
        await self.media.send_file(out)

    async def send_choice(self, card: ChoiceCard) -> str:
        return await self.choices.send(card)

    async def answer_choice(self, chat: ChatRef, choice: Choice, note: str) -> None:
        await self.choices.answer(choice, note)

    async def settle_choice(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self.choices.settle(chat, message_id, text)

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
        return DiscordReplyStream(self.delivery, chat, self._spawn)


_TOKEN_REFUSED = (
    "Discord refused the bot token: set channels.discord.token to the token from the Developer "
    "Portal (Bot > Reset Token) and restart"
)
_INTENT_MISSING = (
    "the bot may not read message content: switch on Developer Portal > Bot > Privileged "
    "Gateway Intents > Message Content Intent, then restart"
)


def _user_id_in(token: str) -> str:
    """The bot's user id, which a bot token's first part holds (base64), or ""."""
    head = token.split(".", 1)[0]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), altchars=b"-_").decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
    return decoded if decoded.isdigit() else ""
