"""The OpenAI-compatible API (`api:`): `GET /v1/models`, `POST /v1/chat/completions`.

Every request needs `Authorization: Bearer <one of api.tokens>` (compared in constant
time; else 401 in OpenAI's error shape; after 5 wrong ones in a minute an address gets 429). `/v1/models` lists the agents by id; a completion
runs a turn of the agent its `model` names (unknown: 404 `model_not_found`), through the
gateway like any turn (its lane, its tools, its persona; the caller sees the answer, not
the tool calls), as a message from outside (the input guard reads it).

Sessions: stateless by default: the request's `messages` are the conversation, written to a
fresh session `agent:<id>:api:<token tag>:dm:call-<run>` before the last user message runs
in it. With `user` in the body (or an `X-Perch-Session` header) Perch keeps one session per
token and user (`...:dm:<user>`) and runs only the last user message; a second request for
a session that is still answering gets 429. `<token tag>` is a short digest of the token,
so two callers with different tokens never share a session.

Streaming (`stream: true`) answers Server-Sent Events at once: the text as the agent writes
it (`chat.completion.chunk`s, cleaned as a chat's preview is: `bot/web/openai_stream.py`;
what it says before it uses a tool included), a `: keep-alive` comment every 10 s while
nothing is written (a tool runs), the rest of the final reply when the turn ends, a usage
chunk when `stream_options.include_usage` asks, and `data: [DONE]`. A client that goes away
(the server cancels its handler) stops the run, as `/stopall` would.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from agents.guard import BLOCKED_REPLY
from agents.model import Message, Usage
from agents.sanitize import is_silent, sanitize_output
from bot.config.hub import ApiConfig
from bot.kernel.sessions import SessionKey
from bot.store.roles import History, Sessions
from bot.web.auth import FailureLimit
from bot.web.hub_ports import SystemTurns, TooLarge, read_body
from bot.web.openai_shapes import (
    ApiError,
    ChatRequest,
    chunk,
    completion,
    error_body,
    model_list,
    parse_request,
)
from bot.web.openai_stream import StreamedText

log = logging.getLogger(__name__)

API_CHANNEL = "api"  # the channel word in an API session's key
KEEPALIVE_S = 10.0
PIECE = 400  # characters per streamed content chunk

if TYPE_CHECKING:  # the turn's outcome, a type only: the web wing never calls the core
    from bot.hub.turns import TurnOutcome


class ApiStore(Sessions, History, Protocol):
    """What the API writes: a stateless request's conversation before its turn."""


def token_tag(token: str) -> str:
    """A short, stable digest of a token: its sessions' account in their keys."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def _error(error: ApiError) -> web.Response:
    response = web.json_response(error_body(error), status=error.status)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="perch"'
    return response


def _answer_text(outcome: TurnOutcome | None) -> tuple[str, Usage, str]:
    """The reply text, usage and finish reason of a finished turn; ApiError if none."""
    if outcome is None:
        raise ApiError(503, "Perch is shutting down or the session is busy; try again")
    if outcome.blocked:
        return BLOCKED_REPLY, Usage(), "content_filter"
    result = outcome.result
    if result is None:
        raise ApiError(500, "the turn ended without an answer", kind="server_error")
    if result.status == "error":
        raise ApiError(502, f"the model failed: {result.error}", kind="server_error")
    text = sanitize_output(result.text)
    text = "" if is_silent(text) else text
    finish = "length" if result.status == "max_iterations" else "stop"
    return text, result.usage, finish


class OpenAIRoutes:
    """The `/v1/` handlers of the daemon's web server."""

    def __init__(
        self, config: ApiConfig, agents: Sequence[str], store: ApiStore, turns: SystemTurns
    ) -> None:
        self.config = config
        self.agents = list(agents)
        self.store = store
        self.turns = turns
        self._busy: set[str] = set()
        self.limit = FailureLimit()  # wrong tokens per client address, as the dashboard's

    def install(self, app: web.Application) -> None:
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.completions)

    def _token(self, request: web.Request) -> str:
        address = request.remote or ""
        if self.limit.retry_after(address):
            raise ApiError(429, "too many wrong tokens; try again in a minute", code="rate_limited")
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        given = given.strip()
        if scheme.lower() == "bearer" and given:
            for token in self.config.tokens:
                if hmac.compare_digest(token.encode(), given.encode("utf-8", "replace")):
                    return token
        self.limit.failed(address)
        log.warning("api: a request from %s without a valid token", address)
        raise ApiError(401, "a valid API token is required", code="invalid_api_key")

    async def models(self, request: web.Request) -> web.StreamResponse:
        try:
            self._token(request)
        except ApiError as error:
            return _error(error)
        return web.json_response(model_list(self.agents))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            token = self._token(request)
            try:
                body = await read_body(request, self.config.max_body)
            except TooLarge:
                raise ApiError(413, f"the body is over {self.config.max_body} bytes") from None
            try:
                data = json.loads(body)
            except ValueError:
                raise ApiError(400, "the body is not JSON") from None
            asked = parse_request(data)
            if asked.model not in self.agents:
                raise ApiError(
                    404,
                    f"The model {asked.model!r} does not exist: the models are Perch's "
                    f"agents ({', '.join(self.agents)})",
                    code="model_not_found",
                )
            user = asked.user or request.headers.get("X-Perch-Session", "").strip()[:200]
            run_id = uuid.uuid4().hex[:12]
            peer = user or f"call-{run_id}"
            key = SessionKey.dm(asked.model, API_CHANNEL, token_tag(token), peer)
            if str(key) in self._busy:
                raise ApiError(429, "this session is still answering; try again", code="busy")
            if not user and asked.earlier:
                await self._write_conversation(key, asked.earlier)
        except ApiError as error:
            return _error(error)
        self._busy.add(str(key))
        try:
            streamed = StreamedText() if asked.stream else None
            run = self.turns.run_system_turn(
                key,
                asked.text,
                system=False,
                when_busy="skip",
                run_id=run_id,
                watch=streamed.on_event if streamed is not None else None,
            )
            task: asyncio.Task[TurnOutcome | None] = asyncio.create_task(run)
            try:
                if streamed is not None:
                    return await self._stream(request, asked, run_id, task, streamed)
                outcome = await asyncio.shield(task)
            except (asyncio.CancelledError, ConnectionError):
                self._stop(key, task)
                raise
            try:
                text, usage, finish = _answer_text(outcome)
            except ApiError as error:
                return _error(error)
            return web.json_response(
                completion(run_id, asked.model, text, usage, int(time.time()), finish)
            )
        finally:
            self._busy.discard(str(key))

    def _stop(self, key: SessionKey, task: asyncio.Task[TurnOutcome | None]) -> None:
        """The caller went away: stop the run (it saves what it has, as after /stopall)."""
        if not task.done():
            runs, _ = self.turns.stop_all(key)
            log.info("api: the caller of %s went away; stopped %d run(s)", key, runs)

    async def _write_conversation(self, key: SessionKey, messages: list[Message]) -> None:
        session = await self.store.session(str(key))
        await self.store.save_run(session.id, str(key), messages, usage=Usage())

    async def _stream(
        self,
        request: web.Request,
        asked: ChatRequest,
        run_id: str,
        task: asyncio.Task[TurnOutcome | None],
        streamed: StreamedText,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        model, created = asked.model, int(time.time())
        await _event(response, chunk(run_id, model, created, {"role": "assistant", "content": ""}))
        while not task.done():  # the text as it is written; a comment while nothing is
            piece = asyncio.ensure_future(streamed.queue.get())
            await asyncio.wait({piece, task}, timeout=KEEPALIVE_S, return_when="FIRST_COMPLETED")
            if piece.done():
                await _event(response, chunk(run_id, model, created, {"content": piece.result()}))
            else:
                piece.cancel()
                if not task.done():
                    await response.write(b": keep-alive\n\n")
        while not streamed.queue.empty():
            text = streamed.queue.get_nowait()
            await _event(response, chunk(run_id, model, created, {"content": text}))
        outcome = task.result()
        try:
            final, usage, finish = _answer_text(outcome)
        except ApiError as error:
            await _event(response, error_body(error))
            await response.write(b"data: [DONE]\n\n")
            return response
        if outcome is None or outcome.blocked or outcome.result is None:
            rest = final
        else:  # what the stream has not shown yet of the cleaned reply
            rest = streamed.rest(outcome.result.text)
        for start in range(0, len(rest), PIECE):
            piece_text = {"content": rest[start : start + PIECE]}
            await _event(response, chunk(run_id, model, created, piece_text))
        await _event(response, chunk(run_id, model, created, {}, finish))
        if asked.include_usage:
            await _event(response, chunk(run_id, model, created, None, usage=usage))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _event(response: web.StreamResponse, data: dict[str, Any]) -> None:
    line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    await response.write(f"data: {line}\n\n".encode())
