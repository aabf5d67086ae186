"""What an agent run tells whoever watches it (metrics, traces): the `RunObserver` protocol.

The loop (`agents.loop.AgentLoop`) and the model router (`agents.providers.router`) enter one
of these context managers around each agent run, each tool call and each model call, and
tell the watch how it ended; an exception leaving the `with` block is the failure itself
(a `ModelError`, or cancellation). Because the work runs *inside* the block, an observer
may make its span current there, so what the work starts (a sub-agent a tool spawns, an
MCP request) is that span's child through `contextvars`. Nothing here imports a metrics or
tracing library: the daemon implements the protocol (`bot/observe/`). `NO_OBSERVER` watches
nothing and costs a method call per hook.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol

from agents.model import ModelRequest, ModelResponse, Usage


class RunWatch(Protocol):
    """One agent run (a turn's loop, a sub-agent's, a memory flush's)."""

    def finished(self, status: str, usage: Usage) -> None:
        """The run ended normally with `status` (`RunResult.status`) and `usage`."""


class ModelCallWatch(Protocol):
    """One model call to one provider (a fallback is a call of its own)."""

    def first_text(self) -> None:
        """The first streamed text arrived (time to first token)."""

    def finished(self, response: ModelResponse) -> None:
        """The model answered with `response` (`response.model` is the one that answered)."""


class ToolCallWatch(Protocol):
    """One tool call of a model response."""

    def finished(self, is_error: bool, content: str, *, cancelled: bool = False) -> None:
        """The call ended with a result the model will read (`is_error`: it failed)."""


class RunObserver(Protocol):
    def agent_run(self, session_key: str, depth: int) -> AbstractContextManager[RunWatch]: ...

    def model_call(
        self, provider: str, model: str, request: ModelRequest
    ) -> AbstractContextManager[ModelCallWatch]: ...

    def tool_call(
        self, call_id: str, name: str, arguments: dict[str, Any], known: bool
    ) -> AbstractContextManager[ToolCallWatch]:
        """`known`: the registry has a tool of that name (else the model made it up)."""


class _Nothing:
    """Every watch at once, doing nothing: one shared instance."""

    __slots__ = ()

    def __enter__(self) -> _Nothing:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def finished(self, *args: Any, **kwargs: Any) -> None:
        return None

    def first_text(self) -> None:
        return None


_NOTHING = _Nothing()


class NoObserver:
    """A `RunObserver` that watches nothing (metrics and tracing off)."""

    __slots__ = ()

    def agent_run(self, session_key: str, depth: int) -> _Nothing:
        return _NOTHING

    def model_call(self, provider: str, model: str, request: ModelRequest) -> _Nothing:
        return _NOTHING

    def tool_call(
        self, call_id: str, name: str, arguments: dict[str, Any], known: bool
    ) -> _Nothing:
        return _NOTHING


NO_OBSERVER: RunObserver = NoObserver()
