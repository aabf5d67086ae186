"""The Slack adapter: a slack-bolt `AsyncApp` over Socket Mode (default) or the HTTP Events API.

Owns the Slack connection (reconnects, status), normalising `message`/`app_mention` events and
the optional slash command to `Inbound`, and delivering `Outbound` as mrkdwn with retries,
thread status and streamed previews (`chat.postMessage` + `chat.update`).

Decisions:
- `account` is the workspace's team id (`T…`) from `auth.test`; it is "" until the first
  successful `auth.test`. The bot user id (`U…`) marks mentions and own messages.
- A channel message that mentions the bot arrives as both `message` and `app_mention`; the
  first one seen (by channel and ts) is handled, the other dropped. Messages from any bot
  (`bot_id`), the bot's own user, edits, deletions and joins are ignored.
- `ChatRef.thread_id` is the Slack thread the message sits in (`thread_ts`), None for
  top-level messages, except that a top-level channel message addressed to the bot gets its
  own ts: the answer opens a thread under it, and follow-ups there share its session.
  `reply_to` is the message ts. In channels the answer always goes into
  a thread: `thread_id`, or else the thread of `reply_to`. In DMs it goes into the thread
  only when the DM message was in one. Threads the bot posted in are remembered (in memory,
  last 4096) so later messages there count as mentions; so do replies under a bot message
  (`parent_user_id`).
- Typing: Slack has no typing indicator for bots, so `typing()` sets the thread status
  (`assistant.threads.setStatus`, "is typing...", cleared with "" on exit). It needs a thread,
  so it is a no-op for top-level DMs, and it switches itself off for the process after the
  first permanent refusal (e.g. `missing_scope`; it needs `chat:write`).
- Formatting: Slack does not reject mrkdwn; if it refuses a message as malformed
  (`invalid_blocks`, `invalid_arguments`, `msg_too_long`, ...) the chunk is resent as plain text.
- Rate limits (429 + Retry-After) and connection errors are retried by slack_sdk retry
  handlers (`max_retries`); each chat has its own send lock, so a slow chat never holds up
  another. Images are downloaded with the bot token, which is only ever sent to slack.com
  hosts or to the configured `base_url` host.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import (
    ChannelStatus,
    ChatKind,
    ChatRef,
    FinalOnlyStream,
    Image,
    Inbound,
    InboundHandler,
    Outbound,
    ReplyStream,
    image_too_large,
)
from channels.chunking import split_markdown
from channels.formatting import render_plain, render_slack_mrkdwn
from channels.typing import keep_typing

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
TYPING_STATUS = "is typing..."

# Message subtypes that carry something a person wrote; everything else (edits, deletions,
# joins, topic changes, bot messages) is ignored.
_ACCEPTED_SUBTYPES: frozenset[str | None] = frozenset({None, "file_share", "thread_broadcast"})
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
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
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
_SEEN_LIMIT = 2048
_THREAD_LIMIT = 4096
_NAME_LIMIT = 10_000
_RETRY_CEILING = 60.0


@dataclass(frozen=True, slots=True)
class SlackOptions:
    """Configuration of the Slack channel (the lead maps `channels.slack` in config.yaml here).

    Beyond the config keys: `ping_interval` is how often the Socket Mode client pings and
    checks its connection (a dropped socket is replaced within about this time);
    `connect_timeout` bounds how long `start()` waits for the first connection before it
    returns with status down and keeps trying in the background; `max_retries` bounds the
    retries of one Web API call on 429 and on connection errors.
    """

    bot_token: str = field(repr=False)
    app_token: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)
    base_url: str = "https://slack.com/api/"
    mode: Literal["socket", "http"] = "socket"
    http_listen: str = "127.0.0.1"
    http_port: int = 3000
    streaming: Literal["off", "partial"] = "partial"
    stream_interval: float = 1.0
    typing_interval: float = 4.0
    max_image_bytes: int = 5_000_000
    chunk_limit: int = 4000
    slash_command: str = ""
    ping_interval: float = 10.0
    connect_timeout: float = 10.0
    max_retries: int = 5

    def __post_init__(self) -> None:
        if not self.bot_token:
            raise ValueError("channels.slack.bot_token is empty; set SLACK_BOT_TOKEN (xoxb-...)")
        if self.bot_token.startswith("xapp-"):
            raise ValueError(
                "channels.slack.bot_token holds an app-level token (xapp-); put the bot token "
                "(xoxb-...) there and the xapp- token in channels.slack.app_token"
            )
        if self.mode == "socket" and not self.app_token:
            raise ValueError(
                "channels.slack.app_token is empty but mode is socket; set SLACK_APP_TOKEN "
                "(xapp-..., with the connections:write scope) or use mode: http"
            )
        if self.mode == "socket" and self.app_token.startswith("xox"):
            raise ValueError(
                "channels.slack.app_token holds a bot/user token; Socket Mode needs the "
                "app-level token (xapp-...) from Basic Information > App-Level Tokens"
            )
        if self.mode == "http" and not self.signing_secret:
            raise ValueError(
                "channels.slack.signing_secret is empty but mode is http; set "
                "SLACK_SIGNING_SECRET (Basic Information > Signing Secret)"
            )
        if self.slash_command and not re.fullmatch(r"/[a-z0-9_\-]+", self.slash_command):
            raise ValueError(
                f"channels.slack.slash_command {self.slash_command!r} is not a slash command; "
                "write it like /perch, or leave it empty"
            )
        if self.chunk_limit < 100:
            raise ValueError("channels.slack.chunk_limit must be at least 100 characters")


class SlackDeliveryError(RuntimeError):
    """Slack refused a message for good (after retries); the text says why and what to do."""


class _SetupError(RuntimeError):
    """A problem on our side of the connection (port in use, wrong token kind)."""


# -- text ------------------------------------------------------------------------------------

_ANGLE = re.compile(r"<([^<>\n]*)>")
_COMMAND = re.compile(r"/([A-Za-z0-9_]+)@([A-Za-z0-9_.\-]+)(?=\s|$)")


def _decode_angle(match: re.Match[str]) -> str:
    target, _, label = match.group(1).partition("|")
    if not target:
        return match.group(0)
    if target[0] in "@#":
        return target[0] + (label.lstrip(target[0]) or target[1:])
    if target[0] == "!":
        return label or "@" + target[1:].split("^", 1)[0]
    if target.startswith("mailto:"):
        return label or target[len("mailto:") :]
    if label and label != target:
        return f"{label} ({target})"
    return target


def normalise_slack_text(text: str, bot_user_id: str, bot_name: str = "") -> tuple[str, bool]:
    """Slack message markup -> plain text for the model, and whether the bot was @mentioned.

    The bot's own `<@U…>` mention is removed (with a following `:`/`,` and spaces); other
    markup becomes readable (`<@U2>` -> `@U2`, `<#C1|general>` -> `#general`, `<url|label>`
    -> `label (url)`, `<!here>` -> `@here`); `&lt; &gt; &amp;` are unescaped; the result is
    stripped, and `/cmd@<bot_name>` at the start becomes `/cmd`.
    """
    mentioned = False
    if bot_user_id:
        own = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^<>]*)?>[:,]?[ \t]*")
        text, count = own.subn("", text)
        mentioned = count > 0
    text = _ANGLE.sub(_decode_angle, text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
    command = _COMMAND.match(text)
    if command is not None and bot_name and command.group(2).lower() == bot_name.lower():
        text = f"/{command.group(1)}{text[command.end() :]}"
    return text, mentioned


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _api_error(exc: SlackApiError) -> str:
    response = exc.response
    error = response.get("error") if response is not None else None
    return str(error or "unknown_error")


# -- the channel -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Arrival:
    """The part of an event decided at once (before any download or lookup)."""

    chat: ChatRef
    sender_id: str
    text: str
    message_id: str
    mentioned: bool
    files: list[dict[str, Any]]
    sender_name: str = ""


class SlackChannel:
    """A Slack app as a Perch channel. `account` is the workspace team id ("" until known)."""

    name = "slack"

    def __init__(self, options: SlackOptions) -> None:
        self._options = options
        self.account = ""
        self._bot_user_id = ""
        self._bot_name = ""
        handlers: list[AsyncRetryHandler] = [
            AsyncRateLimitErrorRetryHandler(max_retry_count=options.max_retries),
            AsyncConnectionErrorRetryHandler(
                max_retry_count=options.max_retries,
                interval_calculator=BackoffRetryIntervalCalculator(backoff_factor=0.5),
            ),
            AsyncServerErrorRetryHandler(max_retry_count=2),
        ]
        self._client = AsyncWebClient(
            token=options.bot_token,
            base_url=options.base_url,
            retry_handlers=handlers,
            logger=logging.getLogger(f"{__name__}.web"),
        )
        # auth.test probes in the reconnect loop: rate limits waited out, connection errors
        # left to our own backoff so start() learns quickly that Slack is unreachable.
        self._probe = AsyncWebClient(
            token=options.bot_token,
            base_url=options.base_url,
            timeout=10,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
            logger=logging.getLogger(f"{__name__}.web"),
        )
        self._status = ChannelStatus(self.name, False, "not started")
        self._status_logged = False
        self._on_message: InboundHandler | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._first_attempt: asyncio.Event | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._http_url: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._seen: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._inbound_tail: dict[str, asyncio.Future[None]] = {}
        self._threads: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._names: dict[str, str] = {}
        self._names_enabled = True
        self._typing_enabled = True
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._lock_users: collections.Counter[tuple[str, str]] = collections.Counter()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        """Connect and return once receiving runs, or after `connect_timeout` with status
        down while the connection keeps being retried in the background. Never raises for
        an unreachable Slack."""
        if self._supervisor is not None:
            raise RuntimeError("the Slack channel is already started; stop() it first")
        self._on_message = on_message
        self._first_attempt = asyncio.Event()
        self._supervisor = asyncio.create_task(self._supervise(), name="slack-supervisor")
        self._supervisor.add_done_callback(self._supervisor_done)
        try:
            await asyncio.wait_for(self._first_attempt.wait(), self._options.connect_timeout)
        except TimeoutError:
            self._set_status(
                False,
                f"still connecting to Slack after {self._options.connect_timeout:g}s; "
                "retrying in the background",
            )

    async def stop(self) -> None:
        """Disconnect and cancel everything this channel started; returns within ~2 s."""
        self._on_message = None
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=1.0)
        socket, self._socket = self._socket, None
        if socket is not None:
            await _close_socket_client(socket)
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.cleanup(), 1.0)
        self._http_url = None
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        log.info("slack: stopped")
        self._status = ChannelStatus(self.name, False, "stopped")

    def status(self) -> ChannelStatus:
        return self._status

    @property
    def http_url(self) -> str | None:
        """Where the Events API endpoint listens in http mode (for Slack's Request URL)."""
        return self._http_url

    def _set_status(self, up: bool, detail: str) -> None:
        previous = self._status
        self._status = ChannelStatus(self.name, up, detail)
        if self._status_logged and previous.up == up:
            if previous.detail != detail:
                log.debug("slack: %s", detail)
            return
        self._status_logged = True
        if up:
            log.info("slack: %s", detail)
        else:
            log.warning("slack is down: %s", detail)

    def _supervisor_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("slack: the connection supervisor crashed: %r", exc, exc_info=exc)
            self._set_status(False, f"connection supervisor crashed: {exc!r}; restart Perch")

    async def _supervise(self) -> None:
        assert self._first_attempt is not None
        delay = min(1.0, self._options.ping_interval)
        while True:
            try:
                await self._bring_up()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set_status(False, self._describe(exc))
                self._first_attempt.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_CEILING)
        self._first_attempt.set()
        if self._socket is not None:
            await self._watch_socket(self._socket)

    async def _bring_up(self) -> None:
        if self._options.mode == "http":
            if self._runner is None:
                await self._listen(self._build_app())
            await self._authenticate()
            self._set_status(True, f"listening for Slack events on {self._http_url}")
            return
        await self._authenticate()
        if self._socket is None:
            self._socket = AsyncSocketModeHandler(
                self._build_app(),
                app_token=self._options.app_token,
                logger=logging.getLogger(f"{__name__}.socket"),
                ping_interval=self._options.ping_interval,
            )
            self._socket.client.message_listeners.append(self._on_socket_message)
        client = self._socket.client
        # Asking for the URL here (not inside the SDK's connect loop) surfaces a bad app
        # token or an unreachable Slack to our own retry loop and status.
        client.wss_uri = await client.issue_new_wss_url()
        await self._socket.connect_async()
        self._set_status(True, "connected (socket mode)")

    async def _watch_socket(self, socket: AsyncSocketModeHandler) -> None:
        every = min(1.0, self._options.ping_interval / 2)
        while True:
            await asyncio.sleep(every)
            if await socket.client.is_connected():
                self._set_status(True, "connected (socket mode)")
            else:
                self._set_status(False, "socket mode connection lost; reconnecting")

    async def _on_socket_message(self, _client: Any, message: dict[str, Any], _raw: Any) -> None:
        if message.get("type") == "hello":
            self._set_status(True, "connected (socket mode)")

    async def _authenticate(self) -> None:
        response = await self._probe.auth_test()
        user_id = response.get("user_id")
        if not user_id:
            raise _SetupError("auth.test returned no user_id; is bot_token a bot token (xoxb-)?")
        if not response.get("bot_id"):
            log.warning(
                "slack: auth.test shows no bot_id; channels.slack.bot_token should be the "
                "Bot User OAuth Token (xoxb-...), not a user token"
            )
        self._bot_user_id = str(user_id)
        self._bot_name = str(response.get("user") or "")
        self.account = str(response.get("team_id") or "")

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, SlackApiError):
            error = _api_error(exc)
            if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive"):
                return f"Slack refused the token ({error}); check channels.slack tokens"
            return f"Slack answered {error}; retrying"
        if isinstance(exc, _SetupError):
            return f"{exc}; retrying"
        if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
            return (
                f"cannot reach Slack at {self._options.base_url} ({type(exc).__name__}); retrying"
            )
        return f"{type(exc).__name__}: {exc}; retrying"

    def _build_app(self) -> AsyncApp:
        app = AsyncApp(
            client=self._client,
            signing_secret=self._options.signing_secret,
            logger=logging.getLogger(f"{__name__}.bolt"),
            # Listeners only decide and hand off to our own tasks, so running them before the
            # ack is cheap and makes an ack mean "this event was looked at".
            process_before_response=True,
            name="perch",
        )
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_mention_event)
        if self._options.slash_command:
            app.command(self._options.slash_command)(self._on_slash_command)
        app.event(re.compile(r".+"))(self._on_other_event)
        return app

    async def _listen(self, app: AsyncApp) -> None:
        web_app = app.web_app(path=EVENTS_PATH, port=self._options.http_port)
        runner = web.AppRunner(web_app, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._options.http_listen, self._options.http_port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise _SetupError(
                f"cannot listen on {self._options.http_listen}:{self._options.http_port} "
                f"({exc.strerror or exc}); change channels.slack.http_port"
            ) from exc
        host, port = runner.addresses[0][:2]
        self._runner = runner
        self._http_url = f"http://{host}:{port}{EVENTS_PATH}"

    # -- receiving ---------------------------------------------------------------------------

    async def _on_message_event(self, event: dict[str, Any]) -> None:
        self._accept(event, via_mention=False)

    async def _on_mention_event(self, event: dict[str, Any]) -> None:
        self._accept(event, via_mention=True)

    async def _on_other_event(self, event: dict[str, Any]) -> None:
        log.debug("slack: %s event ignored", event.get("type"))

    async def _on_slash_command(
        self, ack: Callable[[], Awaitable[Any]], command: dict[str, Any]
    ) -> None:
        await ack()
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        if not channel or not user or self._on_message is None:
            return
        text, _ = normalise_slack_text(
            str(command.get("text") or ""), self._bot_user_id, self._bot_name
        )
        private = channel.startswith("D") or command.get("channel_name") == "directmessage"
        kind: ChatKind = "dm" if private else "group"
        arrival = _Arrival(
            chat=ChatRef(self.name, self.account, kind, channel),
            sender_id=user,
            text=text,
            message_id=f"slash:{command.get('trigger_id') or time.time_ns()}",
            mentioned=True,
            files=[],
            sender_name=str(command.get("user_name") or ""),
        )
        self._spawn(self._deliver(arrival), f"slack-slash-{channel}")

    def _accept(self, event: dict[str, Any], *, via_mention: bool) -> None:
        """Decide at once whether an event becomes an Inbound; the rest runs in a task."""
        if self._on_message is None:
            return
        if event.get("subtype") not in _ACCEPTED_SUBTYPES or event.get("hidden"):
            return
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not isinstance(user, str) or not isinstance(channel, str) or not isinstance(ts, str):
            return
        if event.get("bot_id") or (self._bot_user_id and user == self._bot_user_id):
            return
        if not self._bot_user_id:
            log.warning("slack: event in %s before auth.test succeeded; dropped", channel)
            return
        key = (channel, ts)
        if key in self._seen:
            return
        self._seen[key] = None
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)

        text, mentioned = normalise_slack_text(
            str(event.get("text") or ""), self._bot_user_id, self._bot_name
        )
        thread_ts = event.get("thread_ts")
        thread_id = thread_ts if isinstance(thread_ts, str) and thread_ts else None
        if thread_id is not None and thread_id != ts:
            in_bot_thread = (channel, thread_id) in self._threads
            if in_bot_thread or event.get("parent_user_id") == self._bot_user_id:
                mentioned = True
        channel_type = event.get("channel_type")
        private = channel_type == "im" or (channel_type is None and channel.startswith("D"))
        kind: ChatKind = "dm" if private else "group"
        if kind == "group" and thread_id is None and (mentioned or via_mention):
            # The answer opens a thread under this message: the conversation lives there.
            thread_id = ts
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        arrival = _Arrival(
            chat=ChatRef(self.name, self.account, kind, channel, thread_id, reply_to=ts),
            sender_id=user,
            text=text,
            message_id=ts,
            mentioned=mentioned or via_mention,
            files=files,
        )
        self._spawn(self._deliver(arrival), f"slack-inbound-{channel}-{ts}")

    async def _deliver(self, arrival: _Arrival) -> None:
        # Files and names are fetched concurrently, but each chat's messages reach the
        # handler in arrival order (tasks start in creation order, so this runs first).
        chat_id = arrival.chat.chat_id
        previous = self._inbound_tail.get(chat_id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inbound_tail[chat_id] = done
        try:
            images, notes = await self._collect_files(arrival.files)
            name = arrival.sender_name or await self._sender_name(arrival.sender_id)
            text = "\n".join(part for part in (arrival.text, *notes) if part)
            if previous is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(previous)
            handler = self._on_message
            if handler is None:
                return
            await handler(
                Inbound(
                    chat=arrival.chat,
                    sender_id=arrival.sender_id,
                    text=text,
                    message_id=arrival.message_id,
                    sender_name=name,
                    mentioned=arrival.mentioned,
                    images=tuple(images),
                )
            )
        finally:
            done.set_result(None)
            if self._inbound_tail.get(chat_id) is done:
                del self._inbound_tail[chat_id]

    async def _collect_files(self, files: list[dict[str, Any]]) -> tuple[list[Image], list[str]]:
        images: list[Image] = []
        notes: list[str] = []
        cap = self._options.max_image_bytes
        for file in files:
            name = str(file.get("name") or file.get("title") or "file")
            mimetype = str(file.get("mimetype") or "")
            if not mimetype.startswith("image/"):
                notes.append(f"[file attached: {name}, not passed on]")
                continue
            if mimetype not in _IMAGE_TYPES:
                notes.append(f"[image type not supported: {mimetype}]")
                continue
            size = file.get("size")
            if isinstance(size, int) and size > cap:
                notes.append(image_too_large(cap, size))
                continue
            url = file.get("url_private") or file.get("url_private_download")
            if not isinstance(url, str) or not url:
                notes.append(f"[image {name} could not be downloaded: no url]")
                continue
            data, note = await self._download(url, cap)
            if data is None:
                notes.append(note)
            else:
                images.append(Image(mimetype, data))
        return images, notes

    async def _download(self, url: str, cap: int) -> tuple[bytes | None, str]:
        if not self._may_carry_token(url):
            log.warning(
                "slack: not sending the bot token to %s; image skipped", urlsplit(url).hostname
            )
            return None, "[image could not be downloaded: unexpected file host]"
        headers = {"Authorization": f"Bearer {self._options.bot_token}"}
        timeout = aiohttp.ClientTimeout(total=60)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status != 200:
                    return None, f"[image could not be downloaded: HTTP {response.status}]"
                if response.content_type.startswith("text/html"):
                    # Slack answers with its login page when the token lacks files:read.
                    return None, "[image could not be downloaded: add the files:read scope]"
                data = bytearray()
                async for block in response.content.iter_chunked(65536):
                    data.extend(block)
                    if len(data) > cap:
                        return None, image_too_large(cap)
                return bytes(data), ""
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: image download failed: %s", type(exc).__name__)
            return None, "[image could not be downloaded: network error]"

    def _may_carry_token(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
            return True
        base = urlsplit(self._options.base_url)
        return (parts.scheme, host, parts.port) == (
            base.scheme,
            (base.hostname or "").lower(),
            base.port,
        )

    async def _sender_name(self, user_id: str) -> str:
        if user_id in self._names or not self._names_enabled:
            return self._names.get(user_id, "")
        try:
            response = await self._client.users_info(user=user_id)
        except SlackApiError as exc:
            error = _api_error(exc)
            if error in ("missing_scope", "not_allowed_token_type", "invalid_auth"):
                self._names_enabled = False
                log.info("slack: sender names unavailable (%s); add the users:read scope", error)
            return ""
        except (aiohttp.ClientError, TimeoutError):
            return ""
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        name = str(
            profile.get("display_name")
            or profile.get("real_name")
            or user.get("real_name")
            or user.get("name")
            or ""
        )
        if len(self._names) >= _NAME_LIMIT:
            self._names.clear()
        self._names[user_id] = name
        return name

    # -- sending -----------------------------------------------------------------------------

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as mrkdwn chunks, in order, in the chat's thread (see docstring)."""
        if not out.text.strip():
            return
        chunks = split_markdown(out.text, self._options.chunk_limit)
        async with self._chat_lock(out.chat):
            for chunk in chunks:
                await self._post(out.chat, chunk)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        thread_ts = self._reply_thread(chat)
        if thread_ts is None or not self._typing_enabled:
            return contextlib.nullcontext()

        async def start() -> None:
            await self._set_thread_status(chat.chat_id, thread_ts, TYPING_STATUS)

        async def stop() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._set_thread_status(chat.chat_id, thread_ts, ""), 2.0)

        return keep_typing(start, stop, every=self._options.typing_interval)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        if self._options.streaming == "off":
            return FinalOnlyStream(self.send, chat)
        return SlackReplyStream(self, chat)

    async def _set_thread_status(self, channel: str, thread_ts: str, status: str) -> None:
        if not self._typing_enabled:
            return
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=channel, thread_ts=thread_ts, status=status
            )
        except SlackApiError as exc:
            error = _api_error(exc)
            if error not in _TYPING_UNAVAILABLE:
                raise
            self._typing_enabled = False
            log.info(
                "slack: thread status ('is typing...') unavailable (%s); continuing without a "
                "typing indicator (it needs the chat:write scope)",
                error,
            )

    def _reply_thread(self, chat: ChatRef) -> str | None:
        if chat.thread_id:
            return chat.thread_id
        if chat.kind == "group" and chat.reply_to:
            return chat.reply_to
        return None

    @contextlib.asynccontextmanager
    async def _chat_lock(self, chat: ChatRef) -> AsyncIterator[None]:
        key = (chat.chat_id, self._reply_thread(chat) or "")
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[key] -= 1
            if self._lock_users[key] <= 0:
                del self._lock_users[key]
                self._locks.pop(key, None)

    def _render(self, markdown: str) -> str:
        try:
            return render_slack_mrkdwn(markdown)
        except Exception:
            log.exception("slack: rendering mrkdwn failed; sending plain text")
            return _escape(render_plain(markdown))

    async def _post(self, chat: ChatRef, markdown: str) -> str:
        """Post one chunk; returns its ts. Callers hold the chat lock."""
        thread_ts = self._reply_thread(chat)
        try:
            try:
                response = await self._client.chat_postMessage(
                    channel=chat.chat_id, text=self._render(markdown), thread_ts=thread_ts
                )
            except SlackApiError as exc:
                if _api_error(exc) not in _FORMAT_ERRORS:
                    raise
                log.warning(
                    "slack: %s refused the formatted message (%s); resending as plain text",
                    chat.chat_id,
                    _api_error(exc),
                )
                response = await self._client.chat_postMessage(
                    channel=chat.chat_id,
                    text=_escape(render_plain(markdown)),
                    thread_ts=thread_ts,
                    mrkdwn=False,
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise self._delivery_error("chat.postMessage", chat, exc) from exc
        if thread_ts is not None:
            self._remember_thread(chat.chat_id, thread_ts)
        return str(response.get("ts") or "")

    async def _edit(self, chat: ChatRef, ts: str, markdown: str) -> None:
        try:
            try:
                await self._client.chat_update(
                    channel=chat.chat_id, ts=ts, text=self._render(markdown)
                )
            except SlackApiError as exc:
                if _api_error(exc) not in _FORMAT_ERRORS:
                    raise
                await self._client.chat_update(
                    channel=chat.chat_id, ts=ts, text=_escape(render_plain(markdown))
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise self._delivery_error("chat.update", chat, exc) from exc

    async def _delete(self, chat: ChatRef, ts: str) -> None:
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
        if isinstance(exc, SlackApiError):
            error = _api_error(exc)
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

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("slack: %s failed: %s", task.get_name(), exc, exc_info=exc)


class SlackReplyStream:
    """One preview message, edited at most once per `stream_interval`, finalised in place.

    `update` never waits for Slack: the latest text is kept and a background task posts or
    edits it, trailing edge included. `finish` waits for that task, edits the preview into
    the first chunk of the final text and posts any further chunks after it.
    """

    def __init__(self, channel: SlackChannel, chat: ChatRef) -> None:
        self._channel = channel
        self._chat = chat
        self._limit = channel._options.chunk_limit
        self._interval = channel._options.stream_interval
        self._latest = ""
        self._shown = ""
        self._ts: str | None = None
        self._broken = False
        self._done = False
        self._last_flush = -math.inf
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def update(self, text: str) -> None:
        if self._done or self._broken or not text.strip():
            return
        self._latest = split_markdown(text, self._limit)[0]
        if self._task is None or self._task.done():
            self._task = self._channel._spawn(self._flush_loop(), "slack-stream-preview")

    async def finish(self, text: str) -> None:
        if self._done:
            return
        await self._settle()
        chunks = split_markdown(text, self._limit) if text.strip() else []
        channel, chat = self._channel, self._chat
        if not chunks:
            if self._ts is not None:
                await channel._delete(chat, self._ts)
            return
        async with channel._chat_lock(chat):
            rest = chunks
            if self._ts is not None:
                try:
                    if chunks[0] != self._shown:
                        await channel._edit(chat, self._ts, chunks[0])
                    rest = chunks[1:]
                except SlackDeliveryError as exc:
                    log.warning("slack: finalising the preview failed (%s); posting anew", exc)
                    await channel._delete(chat, self._ts)
            for chunk in rest:
                await channel._post(chat, chunk)

    async def abort(self) -> None:
        await self._settle()

    async def _settle(self) -> None:
        self._done = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait({self._task})

    async def _flush_loop(self) -> None:
        while not self._done and not self._broken and self._latest != self._shown:
            wait = self._last_flush + self._interval - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                continue
            text = self._latest
            try:
                if self._ts is None:
                    async with self._channel._chat_lock(self._chat):
                        self._ts = await self._channel._post(self._chat, text)
                else:
                    await self._channel._edit(self._chat, self._ts, text)
                self._shown = text
            except SlackDeliveryError as exc:
                log.warning("slack: streaming preview stopped: %s", exc)
                self._broken = True
            self._last_flush = time.monotonic()


async def _close_socket_client(socket: AsyncSocketModeHandler) -> None:
    """Close the SDK's Socket Mode client and wait for its background futures, boundedly."""
    client = socket.client
    client.auto_reconnect_enabled = False
    try:
        await asyncio.wait_for(socket.close_async(), 1.0)
    except Exception as exc:
        log.debug("slack: closing the socket client: %r", exc)
    futures = [
        future
        for future in (
            client.message_processor,
            client.current_session_monitor,
            client.message_receiver,
        )
        if future is not None and not future.done()
    ]
    for future in futures:
        future.cancel()
    if futures:
        await asyncio.wait(futures, timeout=1.0)
    if not client.aiohttp_client_session.closed:
        with contextlib.suppress(Exception):
            await client.aiohttp_client_session.close()
