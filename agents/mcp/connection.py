"""One MCP server: connect, keep the connection, call its tools, reconnect with backoff.

`McpConnection.run()` is the server's supervisor task. It opens the transport (a child
process over stdio, or Streamable HTTP on aiohttp through the `httpx2` client the MCP SDK
takes: `httpx-aiohttp`), initializes a `ClientSession`, lists the tools, and
then watches the connection: a ping every `ping_s` while no call is running (one unanswered
for 30 s counts as lost), a call that finds the connection closed, or a `tools/list_changed`
notification (the list is fetched again). When the connection is
lost the state goes `down` with the reason, and the next attempt follows after 1, 2, 4 ...
up to 60 s (the first failure is logged as a warning, the retries after it at info level).
Entries of the `tools:` allow-list that name no tool of the server are warned about when the
list is first read. A call may pass a progress callback for the server's progress
notifications. A stdio server is started through Perch's own transport (`stdio.py`): its own
process group, only a minimal environment (PATH, HOME, ... plus its `env`), a parent-death
signal so it dies with the daemon even after `kill -9`, each message cut while it is read,
and its stderr cleaned, rate-limited and logged as the server's; it is stopped by closing its
stdin, then SIGTERM, then SIGKILL to the group. A server that dies is shown DOWN with its last
stderr line.

Calls never wait for a server that is not up (they fail at once with the state), are bounded
by `timeout_s`, and fail promptly when the connection dies under them. Over HTTP, each request
also carries what `request_headers()` gives at that moment (the caller's trace context,
`traceparent`): the SDK sends a call's request in the caller's `contextvars` context.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol

import httpx2
import mcp_types as types
from httpx_aiohttp.httpx2 import Httpx2AiohttpClient
from mcp import ClientSession
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agents.mcp.spec import ServerSpec
from agents.mcp.stdio import StderrLog, stdio_transport

log = logging.getLogger(__name__)
# The HTTP client logs every request at INFO; one line per MCP call is noise in our logs.
# The MCP transports' own defaults: a server may hold a response stream open for minutes.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
logging.getLogger("httpx2").setLevel(logging.WARNING)

State = Literal["starting", "up", "down", "disabled", "stopped"]
RequestHeaders = Callable[[], Mapping[str, str]]
CONNECT_TIMEOUT_S = 30.0
MAX_BACKOFF_S = 60.0
STOP_GRACE_S = 5.0
PING_TIMEOUT_S = 30.0


class Progress(Protocol):
    """What `call` reports a server's progress notifications for the call to."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


def _allows(pattern: str, name: str) -> bool:
    return name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1]))


class McpCallError(Exception):
    """A call that could not get an answer (server down, timed out, connection lost)."""


def describe(exc: BaseException) -> str:
    """One readable line for an exception, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"program not found: {exc.filename or exc}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, MCPError | ConnectionError) else f"{type(exc).__name__}: {text}"


class McpConnection:
    """The supervisor of one server; `on_change` is called whenever state or tools change."""

    def __init__(
        self,
        spec: ServerSpec,
        on_change: Callable[[], None],
        request_headers: RequestHeaders | None = None,
    ) -> None:
        self.spec = spec
        self._on_change = on_change
        self._request_headers = request_headers
        self.state: State = "starting" if spec.enabled else "disabled"
        self.error = ""
        self.tools: list[types.Tool] = []
        self.since = time.time()
        self.attempts = 0
        self.next_retry_at = 0.0
        self.unknown_tools: list[str] = []  # `tools:` entries that name no tool of the server
        self._session: ClientSession | None = None
        self._in_flight = 0
        self._lost = asyncio.Event()
        self._relist = asyncio.Event()
        self._stop = asyncio.Event()
        self._errlog = StderrLog(spec.name)

    # -- public ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect and stay connected until `stop()`; never raises."""
        if self.spec.refused:
            self._set("down", self.spec.refused, [])
            log.error("mcp server %s not started: %s", self.spec.name, self.spec.refused)
            await self._stop.wait()
            self._set("stopped", "", [])
            return
        backoff = self.spec.first_backoff_s
        while not self._stop.is_set():
            self.attempts += 1
            began = time.monotonic()
            try:
                await self._serve_until_stopped()
                reason = "the connection closed"
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                reason = describe(exc)
            if self._errlog.last and self.spec.command:
                reason += f" (its last line on stderr: {self._errlog.last})"
                self._errlog.last = ""
            self._session = None
            if self._stop.is_set():
                break
            if time.monotonic() - began > MAX_BACKOFF_S:
                backoff = self.spec.first_backoff_s  # it was up for a while: retry soon
            self.next_retry_at = time.time() + backoff
            first = self.state != "down"
            self._set("down", reason, [])
            # The first failure is a warning; the retries that follow are the log's, not yours.
            log.log(
                logging.WARNING if first else logging.INFO,
                "mcp server %s is down (%s); retrying in %.0f s",
                self.spec.name,
                reason,
                backoff,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
        self._set("stopped", "", [])

    def stop(self) -> None:
        self._stop.set()

    async def call(
        self, tool: str, args: dict[str, Any], progress: Progress | None = None
    ) -> types.CallToolResult:
        session = self._session
        if session is None or self.state != "up":
            raise McpCallError(
                f"MCP server {self.spec.name!r} is {self.state}"
                + (f" ({self.error})" if self.error else "")
                + "; try again later"
            )
        timeout = self.spec.timeout_s
        self._in_flight += 1
        try:
            return await asyncio.wait_for(
                session.call_tool(tool, args, progress_callback=progress), timeout
            )
        except TimeoutError:
            raise McpCallError(
                f"MCP server {self.spec.name!r} did not answer {tool!r} within {timeout:g} s "
                f"(mcp.servers.{self.spec.name}.timeout_s)"
            ) from None
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                self._lost.set()
                raise McpCallError(
                    f"MCP server {self.spec.name!r} disconnected during {tool!r}; "
                    "it is being restarted"
                ) from None
            raise McpCallError(f"MCP server {self.spec.name!r}: {exc}") from None
        finally:
            self._in_flight -= 1

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "transport": self.spec.transport,
            "where": self.spec.where(),
            "tools": [t.name for t in self.tools],
            "sandboxed": bool(self.spec.launch),
            "error": self.error,
            "since": self.since,
            "attempts": self.attempts,
            "next_retry_at": self.next_retry_at if self.state == "down" else 0.0,
            "unknown_tools": list(self.unknown_tools),
        }

    # -- the connection ----------------------------------------------------------------------

    def _set(self, state: State, error: str, tools: list[types.Tool]) -> None:
        if state != self.state:
            self.since = time.time()
        self.state, self.error, self.tools = state, error, tools
        self._on_change()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        spec = self.spec
        if spec.command:
            if spec.launch:  # under bwrap: say plainly when the program itself is missing
                path = spec.env.get("PATH") or get_default_environment().get("PATH")
                if shutil.which(spec.command[0], path=path) is None:
                    raise FileNotFoundError(errno.ENOENT, "not found", spec.command[0])
            argv = spec.launch or spec.command
            async with stdio_transport(argv, spec.env, spec.cwd, self._errlog) as streams:
                yield streams
        else:
            hooks = {"request": [self._add_headers]} if self._request_headers else None
            async with (
                Httpx2AiohttpClient(
                    timeout=HTTP_TIMEOUT, headers=spec.headers or None, event_hooks=hooks
                ) as http,
                streamable_http_client(spec.url, http_client=http) as streams,
            ):
                yield streams

    async def _add_headers(self, request: httpx2.Request) -> None:
        if self._request_headers is not None:
            request.headers.update(self._request_headers())

    async def _serve_until_stopped(self) -> None:
        """`_serve_once`, cut short when `stop()` comes while it is still connecting."""
        serve = asyncio.ensure_future(self._serve_once())
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({serve, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not serve.done():  # stopping: an up connection returns by itself, soon
                await asyncio.wait({serve}, timeout=STOP_GRACE_S)
        finally:
            stopped.cancel()
            if not serve.done():
                serve.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serve
        if serve.cancelled():
            return
        failure = serve.exception()  # always retrieved, so asyncio never warns about it
        if failure is not None and not self._stop.is_set():
            raise failure

    async def _serve_once(self) -> None:
        self._lost.clear()
        self._relist.clear()
        async with self._transport() as (read, write):
            session = ClientSession(read, write, message_handler=self._on_message)
            async with session:
                await asyncio.wait_for(session.initialize(), CONNECT_TIMEOUT_S)
                tools = await asyncio.wait_for(self._list_tools(session), CONNECT_TIMEOUT_S)
                self._session = session
                self._set("up", "", tools)
                log.info(
                    "mcp server %s is up: %d tool(s) over %s",
                    self.spec.name,
                    len(tools),
                    self.spec.transport,
                )
                await self._watch(session)

    async def _watch(self, session: ClientSession) -> None:
        """Return when asked to stop; raise when the connection is lost."""
        while not self._stop.is_set():
            waits = [
                asyncio.ensure_future(e.wait()) for e in (self._stop, self._lost, self._relist)
            ]
            try:
                await asyncio.wait(waits, timeout=self.spec.ping_s, return_when="FIRST_COMPLETED")
            finally:
                for w in waits:
                    w.cancel()
            if self._stop.is_set():
                return
            if self._lost.is_set():
                raise ConnectionError("the connection closed")
            if self._relist.is_set():
                self._relist.clear()
                tools = await asyncio.wait_for(self._list_tools(session), CONNECT_TIMEOUT_S)
                self._set("up", "", tools)
                log.info("mcp server %s: tool list changed (%d tools)", self.spec.name, len(tools))
                continue
            if self._in_flight:
                continue  # calls have their own timeouts; a busy server may answer pings late
            try:
                await asyncio.wait_for(session.send_ping(), PING_TIMEOUT_S)
            except TimeoutError:
                raise ConnectionError(
                    f"it did not answer a ping within {PING_TIMEOUT_S:g} s"
                ) from None

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        allow = self.spec.allow
        if allow is None:
            return tools
        unknown = [p for p in allow if not any(_allows(p, t.name) for t in tools)]
        if unknown != self.unknown_tools:
            self.unknown_tools = unknown
            if unknown:
                log.warning(
                    "mcp server %s: tools: %s names no tool it offers (it offers %s); check "
                    "the spelling in mcp.servers.%s.tools",
                    self.spec.name,
                    ", ".join(unknown),
                    ", ".join(t.name for t in tools) or "none",
                    self.spec.name,
                )
        return [t for t in tools if any(_allows(p, t.name) for p in allow)]

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            log.debug("mcp server %s: transport error: %s", self.spec.name, message)
