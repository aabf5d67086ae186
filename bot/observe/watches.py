"""One watched piece of work each: a turn, an agent run, a model call, a tool call, a send.

A watch is a context manager around the work. On entry it starts its span (when tracing is
on); the turn's, the agent run's and the tool call's spans are made current for the work
inside, so model calls, tools and sub-agents nest under them through `contextvars`. On exit
it counts the outcome (when metrics are on) and ends the span: an exception leaving the
block is the outcome (`ModelError.kind`, cancelled, failed) and marks the span as an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextvars import Token
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from agents.cancel import Cancelled
from agents.model import ModelError, ModelRequest, ModelResponse, Usage
from bot.observe import spans as names

if TYPE_CHECKING:
    from bot.observe.metrics import PerchMetrics

FAILED_TURNS = ("error", "failed")


@dataclass(frozen=True, slots=True)
class Sinks:
    """Where watches report: either may be off (None)."""

    metrics: PerchMetrics | None
    tracer: Tracer | None
    content: bool  # message text and tool arguments into spans
    kinds: Mapping[str, str]  # provider name -> kind (gen_ai.provider.name)
    agent: str  # the agent's id (gen_ai.agent.name)
    # (provider, model) the config names: the only models a span's name may carry (`/model
    # <text>` is a chat user's text, kept out of span names; it stays an attribute, cut).
    models: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """A finished turn, for the slow-turn list of `perch status --json`."""

    seconds: float
    channel: str
    session_kind: str
    outcome: str
    trace_id: str
    ended_at: float


def _failure(exc: BaseException | None) -> str:
    if isinstance(exc, asyncio.CancelledError | Cancelled):
        return "cancelled"
    if isinstance(exc, ModelError):
        return exc.kind
    return "failed" if exc is not None else ""


class _Spanned:
    """A span started on entry (None when tracing is off), made current if `current`."""

    __slots__ = ("_span", "_started", "_token")

    def _start(
        self, tracer: Tracer | None, name: str, kind: SpanKind, current: bool, **attrs: Any
    ) -> None:
        self._started = time.perf_counter()
        self._span: trace.Span | None = None
        self._token: Token[Context] | None = None
        if tracer is None:
            return
        self._span = tracer.start_span(name, kind=kind, attributes=attrs)
        if current:
            self._token = context.attach(trace.set_span_in_context(self._span))

    def _end(self, error: str, exc: BaseException | None, **attrs: Any) -> None:
        span = self._span
        if span is None:
            return
        if self._token is not None:
            context.detach(self._token)
        if span.is_recording():
            span.set_attributes(attrs)
            if error:
                span.set_attribute(names.ERROR_TYPE, error)
                span.set_status(Status(StatusCode.ERROR, str(exc) if exc else error))
            if exc is not None and not isinstance(exc, asyncio.CancelledError | Cancelled):
                span.record_exception(exc)
        span.end()


class TurnWatch(_Spanned):
    """One turn: `perch.turn`, the root span of its trace."""

    __slots__ = ("_channel", "_kind", "_on_end", "_run_id", "_sinks", "outcome", "trace_id")

    def __init__(
        self,
        sinks: Sinks,
        channel: str,
        session_kind: str,
        run_id: str,
        on_end: Callable[[TurnRecord], None],
    ) -> None:
        self._sinks, self._channel, self._kind = sinks, channel, session_kind
        self._run_id, self._on_end = run_id, on_end
        self.outcome = ""
        self.trace_id = ""  # hex, when this turn is traced (sampled)

    def __enter__(self) -> TurnWatch:
        self._start(
            self._sinks.tracer,
            "perch.turn",
            SpanKind.SERVER,
            True,
            **{"perch.channel": self._channel, "perch.session.kind": self._kind},
            **{"perch.run_id": self._run_id},
        )
        if self._span is not None:
            ctx = self._span.get_span_context()
            if ctx.trace_flags.sampled:
                self.trace_id = format(ctx.trace_id, "032x")
        return self

    def finished(self, outcome: str) -> None:
        self.outcome = outcome

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        seconds = time.perf_counter() - self._started
        outcome = _failure(exc) if exc is not None else self.outcome or "ok"
        if outcome not in ("cancelled", "failed") and exc is not None:
            outcome = "failed"
        if self._sinks.metrics is not None:
            self._sinks.metrics.turn(self._channel, outcome, seconds)
        record = TurnRecord(seconds, self._channel, self._kind, outcome, self.trace_id, time.time())
        self._on_end(record)
        error = outcome if outcome in FAILED_TURNS else ""
        self._end(error, exc, **{"perch.turn.outcome": outcome})


class RunWatch(_Spanned):
    """One agent run: `invoke_agent <agent>` (a sub-agent's under the tool that spawned it)."""

    __slots__ = ("_depth", "_sinks", "_status", "_usage")

    def __init__(self, sinks: Sinks, depth: int) -> None:
        self._sinks, self._depth = sinks, depth
        self._status = ""
        self._usage: Usage | None = None

    def __enter__(self) -> RunWatch:
        agent = self._sinks.agent if self._depth == 0 else f"{self._sinks.agent} sub-agent"
        attrs = {
            names.OPERATION: "invoke_agent",
            names.AGENT_NAME: agent,
            "perch.depth": self._depth,
        }
        self._start(self._sinks.tracer, f"invoke_agent {agent}", SpanKind.INTERNAL, True, **attrs)
        return self

    def finished(self, status: str, usage: Usage) -> None:
        self._status, self._usage = status, usage

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._span is None:
            return
        status = self._status or _failure(exc)
        usage = self._usage or Usage()
        self._end(
            status if status in FAILED_TURNS else "",
            exc,
            **{
                "perch.run.status": status,
                names.INPUT_TOKENS: usage.context_tokens,
                names.OUTPUT_TOKENS: usage.output_tokens,
            },
        )


class ModelCallWatch(_Spanned):
    """One model call: `chat <model>`, a GenAI client span; counted per provider and model."""

    __slots__ = ("_first", "_model", "_provider", "_request", "_response", "_sinks")

    def __init__(self, sinks: Sinks, provider: str, model: str, request: ModelRequest) -> None:
        self._sinks, self._provider, self._model, self._request = sinks, provider, model, request
        self._first: float | None = None
        self._response: ModelResponse | None = None

    def __enter__(self) -> ModelCallWatch:
        sinks = self._sinks
        attrs: dict[str, Any] = {
            names.OPERATION: "chat",
            names.PROVIDER: sinks.kinds.get(self._provider, self._provider),
            names.REQUEST_MODEL: names.cut(self._model, 128),
            names.REQUEST_MAX_TOKENS: self._request.max_tokens,
            "perch.provider": self._provider,
        }
        if sinks.tracer is not None and sinks.content:
            attrs[names.INPUT_MESSAGES] = names.input_messages(self._request.messages)
        known = (self._provider, self._model) in sinks.models
        name = f"chat {self._model}" if known else "chat"  # never a user's text
        self._start(sinks.tracer, name, SpanKind.CLIENT, False, **attrs)
        return self

    def first_text(self) -> None:
        if self._first is None:
            self._first = time.perf_counter() - self._started

    def finished(self, response: ModelResponse) -> None:
        self._response = response

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        response = self._response if exc is None else None
        outcome = "ok" if response is not None else _failure(exc) or "error"
        usage = response.usage if response is not None else None
        if self._sinks.metrics is not None:
            self._sinks.metrics.model_call(self._provider, self._model, outcome, usage)
        if self._span is None:
            return
        attrs: dict[str, Any] = {}
        if self._first is not None:
            attrs[names.TIME_TO_FIRST_CHUNK] = self._first
        if response is not None and usage is not None:
            attrs[names.RESPONSE_MODEL] = response.model or self._model
            attrs[names.FINISH_REASONS] = [response.stop_reason]
            attrs[names.INPUT_TOKENS] = usage.context_tokens
            attrs[names.OUTPUT_TOKENS] = usage.output_tokens
            attrs[names.CACHE_READ_TOKENS] = usage.cache_read_tokens
            attrs[names.CACHE_WRITE_TOKENS] = usage.cache_write_tokens
            attrs["perch.cost_usd"] = usage.cost_usd
            if self._sinks.content:
                attrs[names.OUTPUT_MESSAGES] = names.output_messages(
                    response.content, response.stop_reason
                )
        self._end("" if outcome == "ok" else outcome, exc, **attrs)


class ToolCallWatch(_Spanned):
    """One tool call: `execute_tool <name>`, current while the tool runs."""

    __slots__ = ("_args", "_call_id", "_known", "_name", "_outcome", "_result", "_sinks")

    def __init__(
        self, sinks: Sinks, call_id: str, name: str, arguments: dict[str, Any], known: bool
    ) -> None:
        self._sinks, self._call_id, self._name = sinks, call_id, name
        self._args, self._known = arguments, known
        self._outcome = ""
        self._result = ""

    def __enter__(self) -> ToolCallWatch:
        sinks = self._sinks
        name = names.cut(self._name, 64)  # a made-up name is the model's text
        attrs: dict[str, Any] = {
            names.OPERATION: "execute_tool",
            names.TOOL_NAME: name,
            names.TOOL_CALL_ID: self._call_id,
            names.TOOL_TYPE: "function",
        }
        if sinks.tracer is not None and sinks.content:
            attrs[names.TOOL_ARGUMENTS] = names.arguments_json(self._args)
        shown = name if self._known else "(unknown tool)"  # a made-up name stays an attribute
        self._start(sinks.tracer, f"execute_tool {shown}", SpanKind.INTERNAL, True, **attrs)
        return self

    def finished(self, is_error: bool, content: str, *, cancelled: bool = False) -> None:
        self._outcome = "cancelled" if cancelled else "error" if is_error else "ok"
        self._result = content

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        outcome = _failure(exc) or self._outcome or "error"
        outcome = "error" if outcome == "failed" else outcome
        if self._sinks.metrics is not None:
            self._sinks.metrics.tool_call(self._name, self._known, outcome)
        attrs: dict[str, Any] = {"perch.tool.outcome": outcome}
        if self._sinks.content and self._result:
            attrs[names.TOOL_RESULT] = names.cut(self._result, names.MAX_CONTENT_CHARS)
        error = "" if outcome == "ok" else "unknown_tool" if not self._known else outcome
        self._end(error, exc, **attrs)


class SendWatch(_Spanned):
    """One message handed to a platform: `perch.send`; counted per channel."""

    __slots__ = ("_channel", "_sinks")

    def __init__(self, sinks: Sinks, channel: str) -> None:
        self._sinks, self._channel = sinks, channel

    def __enter__(self) -> SendWatch:
        attrs = {"perch.channel": self._channel}
        self._start(self._sinks.tracer, "perch.send", SpanKind.CLIENT, False, **attrs)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        outcome = "ok" if exc is None else "error"
        if self._sinks.metrics is not None:
            self._sinks.metrics.send(self._channel, outcome)
        self._end("" if exc is None else type(exc).__name__, exc)
