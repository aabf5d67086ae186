"""Discord messages to `Inbound`: filtered, read (mentions, replies, threads, attachments)
and handed on in arrival order per chat.

Decisions:
- Ignored: messages of any bot (the bot's own included) and webhooks, system messages (joins,
  pins, thread announcements), edits (MESSAGE_UPDATE is not listened to), and a message seen
  before (a gateway replay after a resume).
- `ChatRef`: a DM's `chat_id` is the user's id (its DM channel is remembered for the answer);
  a guild message's is the channel's id, and in a thread the parent channel's, with the
  thread's id as `thread_id` (one session per thread). With `auto_thread`, a message in a
  channel that addresses the bot gets its own id as `thread_id`: the answer starts a thread
  from it, whose id Discord makes the same. `reply_to` is always the message id.
- Mentioned: an @mention of the bot or of a role it holds (not @everyone/@here), a reply to
  one of its messages, or any message in a thread it started or posted in.
- A reply to someone else's message carries that message's first 300 characters, so the
  model sees what "this" refers to.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

import discord

from channels.background import Spawn
from channels.base import ChatRef, Inbound, InboundHandler
from channels.discord.delivery import DiscordDelivery, DiscordDeliveryError
from channels.discord.media import DiscordMedia
from channels.discord.options import DiscordOptions
from channels.discord.text import Names, normalise_discord_text

log = logging.getLogger("channels.discord")

_SEEN_LIMIT = 4096
_QUOTE_LIMIT = 300
_PEOPLES_MESSAGES = (discord.MessageType.default, discord.MessageType.reply)


class DiscordInbound:
    """The receiving side of one bot: `accept` is discord.py's `on_message`."""

    def __init__(
        self, options: DiscordOptions, delivery: DiscordDelivery, media: DiscordMedia, spawn: Spawn
    ) -> None:
        self._options = options
        self._delivery = delivery
        self._media = media
        self._spawn = spawn
        self.account = ""
        self._on_message: InboundHandler | None = None
        self._seen: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._tails: dict[str, asyncio.Future[None]] = {}
        self._parents: dict[int, int | None] = {}  # channel id -> parent (threads) or None

    def set_handler(self, on_message: InboundHandler | None) -> None:
        self._on_message = on_message

    def accept(self, message: discord.Message) -> None:
        """Decide at once whether a message is for us; reading and handing on runs in a task."""
        client = self._delivery.running()
        if self._on_message is None or client is None or client.user is None:
            return
        author = message.author
        if author.bot or author.id == client.user.id or message.webhook_id is not None:
            return
        if message.type not in _PEOPLES_MESSAGES:
            return
        if not message.content.strip() and not message.attachments:
            return  # stickers, embeds-only and the like
        if message.id in self._seen:
            return
        self._seen[message.id] = None
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        key = str(message.channel.id)
        previous = self._tails.get(key)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = turn
        self._spawn(self._deliver(client, message, previous, turn, key), f"discord-in-{message.id}")

    async def hand_on(self, inbound: Inbound, key: str) -> None:
        """Hand an Inbound made elsewhere (a slash command) on, in the chat's order."""
        previous = self._tails.get(key)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = turn
        try:
            if previous is not None:
                await asyncio.wait([previous])
        finally:
            self._finish_turn(turn, key)
        await self._call_handler(inbound)

    async def _deliver(
        self,
        client: discord.Client,
        message: discord.Message,
        previous: asyncio.Future[None] | None,
        turn: asyncio.Future[None],
        key: str,
    ) -> None:
        try:
            inbound = await self._read(client, message)
            if previous is not None:
                await asyncio.wait([previous])
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("discord: could not read message %s", message.id)
            return
        finally:
            self._finish_turn(turn, key)
        if inbound is not None:
            await self._call_handler(inbound)

    def _finish_turn(self, turn: asyncio.Future[None], key: str) -> None:
        if not turn.done():
            turn.set_result(None)
        if self._tails.get(key) is turn:
            del self._tails[key]

    async def _call_handler(self, inbound: Inbound) -> None:
        handler = self._on_message
        if handler is None:
            return
        try:
            await handler(inbound)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "discord: the message handler failed for chat %s message %s",
                inbound.chat.chat_id,
                inbound.message_id,
            )

    async def _read(self, client: discord.Client, message: discord.Message) -> Inbound | None:
        assert client.user is not None
        bot_id = client.user.id
        guild = message.guild
        bot_roles: set[str] = set()
        if guild is not None:
            if guild.self_role is not None:  # the role Discord made for the bot
                bot_roles.add(str(guild.self_role.id))
            if guild.me is not None:
                bot_roles |= {str(role.id) for role in guild.me.roles if role.id != guild.id}
        names = Names(
            users={str(u.id): u.display_name for u in message.mentions},
            roles={str(r.id): r.name for r in message.role_mentions},
            channels=_channel_names(message),
        )
        text, mentioned = normalise_discord_text(
            message.content,
            str(bot_id),
            bot_roles=bot_roles,
            bot_name=client.user.name,
            names=names,
        )
        mentioned = mentioned or any(user.id == bot_id for user in message.mentions)
        referenced = _referenced(message)
        if referenced is not None:
            if referenced.author.id == bot_id:
                mentioned = True
            elif referenced.content.strip():
                quoted = " ".join(referenced.content.split())[:_QUOTE_LIMIT]
                text = f"[replying to {referenced.author.display_name}: {quoted}]\n{text}"
        images, attachments, notes = await self._media.read(list(message.attachments))
        if notes:
            text = "\n".join([text, *notes]).strip()
        sender = message.author
        if guild is None:
            self._delivery.remember_dm(str(sender.id), message.channel.id)
            chat = ChatRef("discord", self.account, "dm", str(sender.id), None, str(message.id))
        else:
            parent = await self.parent_of(client, message.channel)
            if parent is not None:
                thread_id = str(message.channel.id)
                self._delivery.thread_exists(thread_id)
                if self._bot_thread(message.channel, bot_id, thread_id):
                    mentioned = True
                chat_id = str(parent)
            else:
                chat_id = str(message.channel.id)
                thread_id = None
                if self._options.auto_thread and mentioned:
                    thread_id = str(message.id)
                    self._delivery.name_thread(thread_id, text)
            chat = ChatRef("discord", self.account, "group", chat_id, thread_id, str(message.id))
        return Inbound(
            chat=chat,
            sender_id=str(sender.id),
            text=text,
            message_id=str(message.id),
            sender_name=sender.display_name,
            mentioned=mentioned,
            images=tuple(images),
            attachments=tuple(attachments),
        )

    def _bot_thread(self, channel: Any, bot_id: int, thread_id: str) -> bool:
        owner = getattr(channel, "owner_id", None)
        return owner == bot_id or thread_id in self._delivery.bot_threads

    async def parent_of(self, client: discord.Client, channel: Any) -> int | None:
        """The parent channel's id if `channel` is a thread, else None (asked of Discord
        when the library has not seen the channel)."""
        if isinstance(channel, discord.Thread):
            return channel.parent_id
        if not isinstance(channel, discord.PartialMessageable):
            return None
        if channel.id in self._parents:
            return self._parents[channel.id]
        parent: int | None = None
        try:
            fetched = await self._delivery.call(
                "look up", f"channel {channel.id}", lambda: client.fetch_channel(channel.id)
            )
            if isinstance(fetched, discord.Thread):
                parent = fetched.parent_id
        except DiscordDeliveryError as exc:
            log.warning("discord: %s; treating it as a channel", exc)
        self._parents[channel.id] = parent
        if len(self._parents) > _SEEN_LIMIT:
            del self._parents[next(iter(self._parents))]
        return parent


def _referenced(message: discord.Message) -> discord.Message | None:
    reference = message.reference
    if reference is None:
        return None
    resolved = reference.resolved
    return resolved if isinstance(resolved, discord.Message) else None


def _channel_names(message: discord.Message) -> dict[str, str]:
    names: dict[str, str] = {}
    guild = message.guild
    if guild is None:
        return names
    for channel_id in message.raw_channel_mentions:
        with contextlib.suppress(Exception):
            found = guild.get_channel_or_thread(channel_id)
            if found is not None:
                names[str(channel_id)] = found.name
    return names
