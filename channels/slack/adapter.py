"""The Slack adapter: a slack-bolt `AsyncApp` over Socket Mode (default) or the HTTP Events API.

Owns the connection (reconnects, status, stop) and wires the parts that do the rest:
`slack_inbound` (events to `Inbound`), `slack_delivery` (sending, typing), `slack_stream`
(streamed previews), `slack_options` (configuration), `slack_text` (markup), `socket`
(noticing a cut Socket Mode connection within a second and reconnecting), `choices` (Block
Kit buttons and their taps, over either transport).

Decisions:
- `account` is the workspace's team id (`T…`) from `auth.test`; it is "" until the first
  successful `auth.test`. The bot user id (`U…`) marks mentions and own messages.
- Rate limits (429 + Retry-After) and connection errors are retried by slack_sdk retry
  handlers (`max_retries`); `auth.test` probes while connecting wait out rate limits only,
  so an unreachable Slack shows in the status quickly and is retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from contextlib import AbstractAsyncContextManager
from typing import Any

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

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    Choice,
    ChoiceCard,
    FinalOnlyStream,
    Inbound,
    InboundHandler,
    Outbound,
    OutboundFile,
    OutboundVoice,
    ReplyStream,
)
from channels.reconnect import Backoff, connect_until_up
from channels.slack.choices import ACTIONS, SlackChoices
from channels.slack.delivery import TYPING_STATUS, SlackDelivery, SlackDeliveryError
from channels.slack.inbound import SlackInbound
from channels.slack.media import SlackMedia
from channels.slack.options import SlackOptions
from channels.slack.socket import (
    CONNECTED,
    RETRY_CEILING,
    close_socket_client,
    keep_connected,
    one_line_records,
    open_socket,
    take_over_reconnects,
)
from channels.slack.stream import SlackReplyStream
from channels.slack.text import normalise_slack_text, slack_error_code

__all__ = [
    "EVENTS_PATH",
    "TYPING_STATUS",
    "SlackChannel",
    "SlackDeliveryError",
    "SlackOptions",
    "SlackReplyStream",
    "normalise_slack_text",
]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class _SetupError(RuntimeError):
    """A problem on our side of the connection (port in use, wrong token kind)."""


class SlackChannel:
    """A Slack app as a Perch channel. `account` is the workspace team id ("" until known)."""

    name = "slack"

    def __init__(self, options: SlackOptions) -> None:
        self._options = options
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
        self._supervisor: asyncio.Task[None] | None = None
        self._first_attempt: asyncio.Event | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._http_url: str | None = None
        self._tasks = BackgroundTasks(log, "slack")
        self._spawn = self._tasks.spawn
        self._delivery = SlackDelivery(options, self._client)
        self._media = SlackMedia(self._client, self._delivery.reply_thread)
        self._choices = SlackChoices(self._client, self.name)
        self._inbound = SlackInbound(
            self.name,
            options,
            self._client,
            is_bot_thread=self._delivery.is_bot_thread,
            spawn=self._spawn,
        )

    @property
    def account(self) -> str:
        """The workspace team id (`T…`) from auth.test; "" until it first succeeds."""
        return self._inbound.account

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        """Connect and return once receiving runs, or after `connect_timeout` with status
        down while the connection keeps being retried in the background. Never raises for
        an unreachable Slack."""
        if self._supervisor is not None:
            raise RuntimeError("the Slack channel is already started; stop() it first")
        self._inbound.set_handler(on_message)
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
        self._inbound.set_handler(None)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=1.0)
        socket, self._socket = self._socket, None
        if socket is not None:
            await close_socket_client(socket)
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.cleanup(), 1.0)
        self._http_url = None
        await self._tasks.cancel_all(timeout=1.0)
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

        def failed(exc: Exception, delay: float) -> bool:
            self._set_status(False, self._describe(exc))
            return True

        backoff = Backoff(min(1.0, self._options.ping_interval), RETRY_CEILING)
        await connect_until_up(
            self._bring_up, backoff, on_failure=failed, attempted=self._first_attempt
        )
        if self._socket is not None:
            await keep_connected(
                self._socket.client,
                ping_interval=self._options.ping_interval,
                connect_timeout=self._options.connect_timeout,
                set_status=self._set_status,
                describe=self._describe,
            )

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
                logger=one_line_records(logging.getLogger(f"{__name__}.socket")),
                ping_interval=self._options.ping_interval,
            )
            take_over_reconnects(self._socket.client)
            self._socket.client.message_listeners.append(self._on_socket_message)
        # Asking for the URL here (not inside the SDK's connect loop) surfaces a bad app
        # token or an unreachable Slack to our own retry loop and status.
        await open_socket(self._socket.client, self._options.connect_timeout)
        self._set_status(True, CONNECTED)

    async def _on_socket_message(self, _client: Any, message: dict[str, Any], _raw: Any) -> None:
        if message.get("type") == "hello":
            self._set_status(True, CONNECTED)

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
        self._inbound.identify(
            bot_user_id=str(user_id),
            bot_name=str(response.get("user") or ""),
            account=str(response.get("team_id") or ""),
        )

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, SlackApiError):
            error = slack_error_code(exc)
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
            # Socket Mode needs no signature check (and no secret): slack_sdk >= 3.43 refuses
            # an empty one where bolt < 1.29 builds the check anyway.
            request_verification_enabled=self._options.mode == "http",
            logger=logging.getLogger(f"{__name__}.bolt"),
            # Listeners only decide and hand off to our own tasks, so running them before the
            # ack is cheap and makes an ack mean "this event was looked at".
            process_before_response=True,
            name="perch",
        )
        app.event("message")(self._inbound.on_message_event)
        app.event("app_mention")(self._inbound.on_mention_event)
        if self._options.slash_command:
            app.command(self._options.slash_command)(self._inbound.on_slash_command)
        app.action(ACTIONS)(self._on_tap)
        app.event(re.compile(r".+"))(self._inbound.on_other_event)
        return app

    async def _on_tap(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        tap = self._choices.read_tap(body, self.account)
        handler = self._inbound.handler
        if tap is not None and handler is not None:
            self._spawn(_deliver(handler, tap), "slack-tap")

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

    # -- sending (see slack_delivery and slack_stream) ---------------------------------------

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown as mrkdwn chunks, in order, in the chat's thread."""
        await self._delivery.send(out)

    async def send_file(self, out: OutboundFile) -> None:
        await self._media.send_file(out)

    async def send_choice(self, card: ChoiceCard) -> str:
        return await self._choices.send(card)

    async def answer_choice(self, chat: ChatRef, choice: Choice, note: str) -> None:
        await self._choices.answer(chat, choice, note)

    async def settle_choice(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self._choices.settle(chat, message_id, text)

    async def send_voice(self, out: OutboundVoice) -> None:
        """Slack has no voice notes a bot can send: the audio goes as an OGG file (played in
        place by Slack's clients); the text follows as a message of its own."""
        await self._media.send_file(
            OutboundFile(out.chat, "voice-reply.ogg", "audio/ogg", out.data, out.caption)
        )

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        await self._media.react(chat, message_id, author, emoji, remove=remove)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return self._delivery.typing(chat)

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        if self._options.streaming == "off":
            return FinalOnlyStream(self.send, chat)
        return SlackReplyStream(self._delivery, chat, self._spawn)


async def _deliver(handler: InboundHandler, inbound: Inbound) -> None:
    await handler(inbound)
