"""Delivering to Slack: `Outbound` Markdown as mrkdwn chunks in the right thread, with a
plain-text resend when Slack refuses the formatting, per-chat send locks, the thread status
that stands in for typing, and `SlackDeliveryError` saying why Slack refused for good.

Decisions:
- In channels the answer always goes into a thread: `thread_id`, or else the thread of
  `reply_to`. In DMs it goes into the thread only when the DM message was in one. Threads
  the bot posted in are remembered (in memory, last 4096) so later messages there count as
  mentions (see `is_bot_thread`).
- Typing: Slack has no typing indicator for bots, so `typing()` sets the thread status
  (`assistant.threads.setStatus`, "is typing...", cleared with "" on exit). It needs a thread,
  so it is a no-op for top-level DMs, and it switches itself off for the process after the
  first permanent refusal (e.g. `missing_scope`; it needs `chat:write`).
- Formatting: Slack does not reject mrkdwn; if it refuses a message as malformed
  (`invalid_blocks`, `invalid_arguments`, `msg_too_long`, ...) the chunk is resent as plain text.
- Rate limits and connection errors are retried by the client's slack_sdk retry handlers;
  each chat has its own send lock, so a slow chat never holds up another.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from contextlib import AbstractAsyncContextManager

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import ChatRef, Outbound
from channels.chunking import split_markdown
from channels.formatting import render_plain
from channels.ordering import ChatLocks
from channels.slack.options import SlackOptions
from channels.slack.render import render_slack_mrkdwn
from channels.slack.text import escape_mrkdwn, slack_error_code
from channels.typing import keep_typing

# One logger for the whole Slack adapter: log settings and records keep naming channels.slack.
log = logging.getLogger("channels.slack")

TYPING_STATUS = "is typing..."

# Errors meaning "this text was malformed", answered by resending the chunk as plain text.
_FORMAT_ERRORS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "invalid_arguments", "msg_too_long", "no_text"}
)
# Errors meaning "thread status will never work for this app": typing switches itself off.
_TYPING_UNAVAILABLE = frozenset(
    {
        "missing_scope",
        "unknown_method",
        "not_allowed_token_type",
        "method_deprecated",
        "feature_not_enabled",
        "not_authed",
        "invalid_auth",
        "no_permission",
    }
)
_HINTS = {
    "not_in_channel": "invite the bot to the channel (/invite @<bot name>)",
    "channel_not_found": "check the channel id and that the bot was added to it",
    "is_archived": "the channel is archived; unarchive it or reply elsewhere",
    "invalid_auth": "check channels.slack.bot_token (xoxb-...)",
    "not_authed": "check channels.slack.bot_token (xoxb-...)",
    "token_revoked": "the app was uninstalled or the token revoked; reinstall it and update the token",
    "account_inactive": "the app was uninstalled or the token revoked; reinstall it and update the token",
    "ratelimited": "Slack kept rate limiting after all retries; try again later",
    "message_not_found": "the message to edit no longer exists",
    "cant_update_message": "the bot may only edit its own messages",
}
_THREAD_LIMIT = 4096


class SlackDeliveryError(RuntimeError):
    """Slack refused a message for good (after retries); the text says why and what to do."""


class SlackDelivery:
    """Posts, edits and deletes messages of one Slack app through its Web API client."""

    def __init__(self, options: SlackOptions, client: AsyncWebClient) -> None:
        self._options = options
        self._client = client
        self._threads: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._typing_enabled = True
        self._turns = ChatLocks()

    @property
    def options(self) -> SlackOptions:
        return self._options

    def is_bot_thread(self, channel: str, thread_ts: str) -> bool:
        """Whether the bot posted in this thread (among the last 4096 it posted in)."""
        return (channel, thread_ts) in self._threads

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as mrkdwn chunks, in order, in the chat's thread (see docstring)."""
        if not out.text.strip():
            return
        chunks = split_markdown(out.text, self._options.chunk_limit)
        async with self.chat_lock(out.chat):
            for chunk in chunks:
                await self.post(out.chat, chunk)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        thread_ts = self.reply_thread(chat)
        if thread_ts is None or not self._typing_enabled:
            return contextlib.nullcontext()

        async def start() -> None:
            await self._set_thread_status(chat.chat_id, thread_ts, TYPING_STATUS)

        async def stop() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._set_thread_status(chat.chat_id, thread_ts, ""), 2.0)

        return keep_typing(start, stop, every=self._options.typing_interval)

    async def _set_thread_status(self, channel: str, thread_ts: str, status: str) -> None:
        if not self._typing_enabled:
            return
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=channel, thread_ts=thread_ts, status=status
            )
        except SlackApiError as exc:
            error = slack_error_code(exc)
            if error not in _TYPING_UNAVAILABLE:
                raise
            self._typing_enabled = False
            log.info(
                "slack: thread status ('is typing...') unavailable (%s); continuing without a "
                "typing indicator (it needs the chat:write scope)",
                error,
            )

    def reply_thread(self, chat: ChatRef) -> str | None:
        if chat.thread_id:
            return chat.thread_id
        if chat.kind == "group" and chat.reply_to:
            return chat.reply_to
        return None

    def chat_lock(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """Hold the send turn of this chat's reply thread (one per chat and thread)."""
        return self._turns.hold((chat.chat_id, self.reply_thread(chat) or ""))

    def _render(self, markdown: str) -> str:
        try:
            return render_slack_mrkdwn(markdown)
        except Exception:
            log.exception("slack: rendering mrkdwn failed; sending plain text")
            return escape_mrkdwn(render_plain(markdown))

    async def post(self, chat: ChatRef, markdown: str) -> str:
        """Post one chunk; returns its ts. Callers hold the chat lock."""
        thread_ts = self.reply_thread(chat)
        try:
            try:
                response = await self._client.chat_postMessage(
                    channel=chat.chat_id, text=self._render(markdown), thread_ts=thread_ts
                )
            except SlackApiError as exc:
                if slack_error_code(exc) not in _FORMAT_ERRORS:
                    raise
                log.warning(
                    "slack: %s refused the formatted message (%s); resending as plain text",
                    chat.chat_id,
                    slack_error_code(exc),
                )
                response = await self._client.chat_postMessage(
                    channel=chat.chat_id,
                    text=escape_mrkdwn(render_plain(markdown)),
                    thread_ts=thread_ts,
                    mrkdwn=False,
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise self._delivery_error("chat.postMessage", chat, exc) from exc
        if thread_ts is not None:
            self._remember_thread(chat.chat_id, thread_ts)
        return str(response.get("ts") or "")

    async def edit(self, chat: ChatRef, ts: str, markdown: str) -> None:
        """Replace the text of the bot's message `ts` (plain text if Slack refuses mrkdwn)."""
        try:
            try:
                await self._client.chat_update(
                    channel=chat.chat_id, ts=ts, text=self._render(markdown)
                )
            except SlackApiError as exc:
                if slack_error_code(exc) not in _FORMAT_ERRORS:
                    raise
                await self._client.chat_update(
                    channel=chat.chat_id, ts=ts, text=escape_mrkdwn(render_plain(markdown))
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise self._delivery_error("chat.update", chat, exc) from exc

    async def delete(self, chat: ChatRef, ts: str) -> None:
        """Delete the bot's message `ts`; a failure is only logged."""
        try:
            await self._client.chat_delete(channel=chat.chat_id, ts=ts)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: could not delete preview %s in %s: %s", ts, chat.chat_id, exc)

    def _remember_thread(self, channel: str, thread_ts: str) -> None:
        key = (channel, thread_ts)
        self._threads[key] = None
        self._threads.move_to_end(key)
        while len(self._threads) > _THREAD_LIMIT:
            self._threads.popitem(last=False)

    def _delivery_error(self, method: str, chat: ChatRef, exc: BaseException) -> SlackDeliveryError:
        status = getattr(exc.response, "status_code", 0) if isinstance(exc, SlackApiError) else 0
        if status >= 500:
            return SlackDeliveryError(
                f"Slack {method} to {chat.chat_id} failed: Slack is failing for now "
                f"(HTTP {status}, still after retries); try again later"
            )
        if isinstance(exc, SlackApiError):
            error = slack_error_code(exc)
            needed = exc.response.get("needed") if exc.response is not None else None
            if error == "missing_scope":
                hint = f"add the {needed or 'missing'} scope to the Slack app and reinstall it"
            else:
                hint = _HINTS.get(error, f"see https://docs.slack.dev/reference/methods/{method}")
            return SlackDeliveryError(f"Slack refused {method} in {chat.chat_id} ({error}): {hint}")
        return SlackDeliveryError(
            f"Slack {method} to {chat.chat_id} failed after retries "
            f"({type(exc).__name__}: {exc}); check the network or {self._options.base_url}"
        )
