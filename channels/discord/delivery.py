"""Delivering to Discord: `Outbound` Markdown as Discord Markdown chunks in the right channel,
per-chat send order, typing, and `DiscordDeliveryError` saying why Discord refused for good.

Decisions:
- Where an answer goes: a DM to the user's DM channel (opened with `POST /users/@me/channels`
  the first time and remembered); a thread's answer into the thread; in a guild channel the
  first chunk replies to the message that asked (no ping: `allowed_mentions` is empty for
  every message, so nothing the model writes pings anyone). A chat whose thread id is the
  asking message's own id (`auto_thread`) gets that thread started from the message first;
  if Discord refuses (no Create Public Threads permission), the answer goes to the channel.
- Chunks: `split_markdown` at `chunk_limit`, measured after rendering in UTF-16 units, so
  every rendered chunk fits Discord's 2,000 characters with fences balanced.
- Retries are safe: each chunk carries one nonce (with `enforce_nonce`) on every attempt, so
  a post that reached Discord before the connection broke is not posted twice.
- Rate limits: discord.py keeps Discord's buckets and waits out a 429 itself (up to 30 s
  and five tries); a 429 that still comes back (`RateLimited`, or the fifth try's
  `HTTPException`) is waited out here up to `max_rate_limit_wait`, as are 5xx answers and
  network errors, each within `send_attempts`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import aiohttp
import discord

from channels.base import ChatRef, Outbound
from channels.chunking import split_markdown
from channels.discord.options import DiscordOptions
from channels.discord.render import escape_discord, render_discord
from channels.ordering import ChatLocks
from channels.retry import RetryPolicy, call_with_retries
from channels.typing import keep_typing

log = logging.getLogger("channels.discord")

T = TypeVar("T")
NO_PINGS = discord.AllowedMentions.none()
_THREAD_EXISTS = 160004
_HINTS = {
    50001: "the bot cannot see this channel; give its role View Channel there",
    50013: "the bot lacks a permission here (Send Messages, Send Messages in Threads, "
    "Read Message History, Create Public Threads, Add Reactions)",
    50007: "this user does not accept DMs from the bot (no shared server, or DMs closed)",
    10003: "the channel no longer exists or the bot was removed from it",
    10008: "the message no longer exists",
}


class DiscordDeliveryError(RuntimeError):
    """Discord refused a message for good (after retries); the text says why and what to do."""


def discord_length(text: str) -> int:
    """Length as Discord may count it: UTF-16 code units (an emoji can count twice)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def render_chunks(markdown: str, limit: int) -> list[str]:
    """`markdown` as Discord Markdown chunks of at most `limit` (rendered, UTF-16 units)."""

    def rendered_length(chunk: str) -> int:
        return discord_length(render_discord(chunk))

    chunks = split_markdown(markdown, limit, measure=rendered_length)
    out = []
    for chunk in chunks:
        text = render_discord(chunk)
        if not text.strip():  # markup with nothing to show: send what was written
            text = escape_discord(chunk)[:limit]
        out.append(text)
    return out


def retry_after(exc: BaseException) -> float | None:
    """The wait a rate limit asks for, if `exc` is one."""
    if isinstance(exc, discord.RateLimited):
        return exc.retry_after
    if isinstance(exc, discord.HTTPException) and exc.status == 429:
        header = exc.response.headers.get("Retry-After") if exc.response is not None else None
        try:
            return float(header) if header else 1.0
        except ValueError:
            return 1.0
    return None


class DiscordDelivery:
    """Posts, edits and deletes the bot's messages (see the module docstring).

    `current` returns the running discord.py client, or None when the channel is not running.
    """

    def __init__(
        self, options: DiscordOptions, current: Callable[[], discord.Client | None]
    ) -> None:
        self.options = options
        self._current = current
        self._turns = ChatLocks()
        self._dm_channels: dict[str, int] = {}
        self._threads_ready: set[str] = set()
        self._threads_refused: set[str] = set()
        self.bot_threads: set[str] = set()  # threads the bot posted in (mentions there count)
        self._thread_names: dict[str, str] = {}

    # -- where things go -------------------------------------------------------------------

    def running(self) -> discord.Client | None:
        """The client while the channel runs and is logged in, else None."""
        client = self._current()
        return client if client is not None and client.user is not None else None

    def client(self) -> discord.Client:
        client = self._current()
        if client is None or client.is_closed():
            raise DiscordDeliveryError(
                "the Discord channel is not running (not started or stopped)"
            )
        return client

    def remember_dm(self, user_id: str, channel_id: int) -> None:
        self._dm_channels[user_id] = channel_id

    def thread_exists(self, thread_id: str) -> None:
        self._threads_ready.add(thread_id)

    async def target(self, chat: ChatRef) -> discord.PartialMessageable:
        """The channel (DM, thread or guild channel) a chat's messages go to."""
        client = self.client()
        if chat.kind == "dm":
            channel_id = self._dm_channels.get(chat.chat_id)
            if channel_id is None:
                dm = await self.call(
                    "open a DM with",
                    chat,
                    lambda: client.create_dm(discord.Object(int(chat.chat_id))),
                )
                channel_id = self._dm_channels[chat.chat_id] = dm.id
            return client.get_partial_messageable(channel_id, type=discord.ChannelType.private)
        thread = chat.thread_id
        if thread and thread not in self._threads_refused:
            if thread == chat.reply_to and thread not in self._threads_ready:
                await self._start_thread(client, chat, thread)
            if thread not in self._threads_refused:
                return client.get_partial_messageable(int(thread))
        return client.get_partial_messageable(int(chat.chat_id))

    def message_channel(self, chat: ChatRef, message_id: str) -> int:
        """The channel a message of this chat was posted in (for reactions)."""
        if chat.kind == "dm":
            return self._dm_channels.get(chat.chat_id, 0)
        if chat.thread_id and chat.thread_id != message_id:
            return int(chat.thread_id)
        return int(chat.chat_id)

    async def _start_thread(self, client: discord.Client, chat: ChatRef, thread: str) -> None:
        """Start the thread an answer opens, from the asking message (see the docstring)."""
        try:
            parent = client.get_channel(int(chat.chat_id)) or await self.call(
                "look up", chat, lambda: client.fetch_channel(int(chat.chat_id))
            )
            if not isinstance(parent, discord.TextChannel):
                raise DiscordDeliveryError(f"channel {chat.chat_id} cannot hold threads")
            starter = parent.get_partial_message(int(thread))
            await self.call(
                "start a thread in",
                chat,
                lambda: starter.create_thread(
                    name=self._thread_name(chat), auto_archive_duration=1440
                ),
            )
        except DiscordDeliveryError as exc:
            cause = exc.__cause__
            if isinstance(cause, discord.HTTPException) and cause.code == _THREAD_EXISTS:
                self._threads_ready.add(thread)
                return
            log.warning("discord: %s; answering in the channel instead", exc)
            self._threads_refused.add(thread)
            return
        self._threads_ready.add(thread)

    def name_thread(self, thread_id: str, text: str) -> None:
        """The name a thread started from message `thread_id` gets: its first words."""
        words = " ".join(text.split())[:80] or "Perch"
        self._thread_names[thread_id] = words
        while len(self._thread_names) > 1024:
            del self._thread_names[next(iter(self._thread_names))]

    def _thread_name(self, chat: ChatRef) -> str:
        return self._thread_names.pop(chat.thread_id or "", "") or "Perch"

    # -- sending ---------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        if not out.text.strip():
            return
        chunks = render_chunks(out.text, self.options.chunk_limit)
        async with self.chat_lock(out.chat):
            await self.post_chunks(out.chat, chunks)

    async def post_chunks(self, chat: ChatRef, chunks: Sequence[str]) -> None:
        """Post rendered chunks in order; the first replies to the asking message. Callers
        hold the chat lock."""
        for index, chunk in enumerate(chunks):
            await self.post(chat, chunk, reply=index == 0)

    def chat_lock(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return self._turns.hold((chat.chat_id, chat.thread_id or ""))

    async def post(self, chat: ChatRef, rendered: str, *, reply: bool) -> int:
        """Post one rendered chunk; its message id."""
        channel = await self.target(chat)
        reference = None
        if reply and self._replies_in_place(chat):
            assert chat.reply_to is not None
            reference = discord.MessageReference(
                message_id=int(chat.reply_to), channel_id=channel.id, fail_if_not_exists=False
            )

        nonce = secrets.randbits(62)  # the same on every retry: Discord posts it once

        async def attempt() -> discord.Message:
            if reference is None:
                return await channel.send(rendered, allowed_mentions=NO_PINGS, nonce=nonce)
            return await channel.send(
                rendered,
                reference=reference,
                allowed_mentions=NO_PINGS,
                mention_author=False,
                nonce=nonce,
            )

        message = await self.call("send a message to", chat, attempt)
        if chat.thread_id and channel.id == int(chat.thread_id):
            self.bot_threads.add(chat.thread_id)
        return message.id

    def _replies_in_place(self, chat: ChatRef) -> bool:
        """Whether an answer quotes the asking message: in guild channels, unless the answer
        opens a thread started from that very message."""
        if chat.kind != "group" or not chat.reply_to or not chat.reply_to.isdigit():
            return False
        return chat.reply_to != chat.thread_id or chat.thread_id in self._threads_refused

    async def edit(self, chat: ChatRef, message_id: int, rendered: str) -> None:
        channel = await self.target(chat)
        message = channel.get_partial_message(message_id)
        await self.call(
            "edit a message in",
            chat,
            lambda: message.edit(content=rendered, allowed_mentions=NO_PINGS),
        )

    async def delete(self, chat: ChatRef, message_id: int) -> None:
        """Delete one of the bot's messages; a failure is only logged."""
        try:
            channel = await self.target(chat)
            await self.call(
                "delete a message in", chat, channel.get_partial_message(message_id).delete
            )
        except DiscordDeliveryError as exc:
            log.warning("discord: could not delete preview %s: %s", message_id, exc)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        async def start() -> None:
            channel = await self.target(chat)
            await channel.typing()

        return keep_typing(start, None, every=self.options.typing_interval)

    # -- retries and errors ----------------------------------------------------------------

    async def call(self, action: str, chat: ChatRef | str, op: Callable[[], Awaitable[T]]) -> T:
        """Run one REST call, retrying what the module docstring says; errors become
        `DiscordDeliveryError` (the library's exception kept as its cause)."""
        options = self.options
        policy = RetryPolicy(options.send_attempts, options.retry_backoff, jitter=0.2)

        def retryable(exc: BaseException) -> bool:
            wait = retry_after(exc)
            if wait is not None:
                return wait <= options.max_rate_limit_wait
            if isinstance(exc, discord.DiscordServerError):
                return True
            return isinstance(exc, aiohttp.ClientError | OSError | TimeoutError)

        def on_retry(exc: BaseException, attempt: int, wait: float) -> None:
            log.warning(
                "discord: %s %s failed (%s); retry %d/%d in %.1f s",
                action,
                _where(chat),
                _describe(exc),
                attempt,
                policy.attempts - 1,
                wait,
            )

        try:
            return await call_with_retries(
                op, policy, retryable=retryable, wait_hint=retry_after, on_retry=on_retry
            )
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DiscordDeliveryError(
                f"could not {action} Discord {_where(chat)}: {_describe(exc)}"
            ) from exc


def _where(chat: ChatRef | str) -> str:
    if isinstance(chat, str):
        return chat
    if chat.kind == "dm":
        return f"DM with {chat.chat_id}"
    thread = f" thread {chat.thread_id}" if chat.thread_id else ""
    return f"channel {chat.chat_id}{thread}"


def _describe(exc: BaseException) -> str:
    wait = retry_after(exc)
    if wait is not None:
        return f"rate limited by Discord, asked to wait {wait:.1f} s"
    if isinstance(exc, discord.HTTPException):
        hint = _HINTS.get(exc.code, "")
        text = exc.text or exc.response.reason or ""
        return f"HTTP {exc.status} code {exc.code} ({text})" + (f": {hint}" if hint else "")
    if isinstance(exc, discord.DiscordException):
        return str(exc) or type(exc).__name__
    return f"network error ({type(exc).__name__})"
