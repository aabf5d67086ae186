"""The tool contract: `Tool`, `ToolContext`, `ToolResult` and the `ToolRegistry`.

A tool is an object with a `name`, a `description`, a JSON-schema `input_schema` and an async
`run(args, ctx)`. Services a tool needs (cron, spawning, sending) are given to it when it is
constructed; `ToolContext` carries only what belongs to one run. A tool signals a problem the
model should read by raising `ToolError` (or returning `ToolResult(..., is_error=True)`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agents.cancel import CancelToken
from agents.model import ImageBlock


class ToolError(Exception):
    """A failure the model should see as the tool's result, e.g. a refused path."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns: text, and images the model should see with it (checked against
    `agents.tool_images` limits by whoever builds them, e.g. the MCP result mapping)."""

    content: str
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()


class ToolProgressSink(Protocol):
    """Where a running tool says how far it is: `fraction` from 0 to 1, or None when it
    cannot tell, and an optional message. The loop turns it into a `ToolProgress` event."""

    async def __call__(self, fraction: float | None, message: str = "") -> None: ...


@dataclass(slots=True)
class ToolContext:
    """Per-run facts a tool may use.

    `origin` is an opaque string naming the chat the run serves (the gateway's business; tools
    such as `cron` store it so results go back there). `depth` is 0 for a top-level run and
    n for a sub-agent n levels down. `run_id` groups calls made by one run. `model` is the
    model the run was started with (None: the agent's default); sub-agents inherit it.
    `progress` is where this call's progress goes (`report`). `requester` is the platform id
    of the person whose message started the run (None for the daemon's own runs): approvals
    with `approver: requester` ask them; `pause` is held while the run waits for one.
    `private` names workspace entries (first path components, e.g. `MEMORY.md`, `memory`)
    this run may not open, list or write: the owner's memory files in a turn for someone
    else (bot/kernel/people.py).
    """

    workspace: Path
    session_key: str
    cancel: CancelToken = field(default_factory=CancelToken)
    origin: str | None = None
    depth: int = 0
    run_id: str = ""
    model: str | None = None
    progress: ToolProgressSink | None = None  # set by the loop for each call
    requester: str | None = None
    # Held while the run waits for a person (an approval): the run's daemon-wide slot goes
    # to other turns meanwhile and is taken back after. None: nothing to give back.
    pause: Callable[[], AbstractAsyncContextManager[None]] | None = None
    private: tuple[str, ...] = ()

    async def report(self, fraction: float | None, message: str = "") -> None:
        """Tell whoever watches this call how far it is (nothing happens if nobody does)."""
        if self.progress is not None:
            await self.progress(fraction, message)


class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


class ToolProvider(Protocol):
    """A source of tools that can change at run time (an MCP server manager).

    `generation` changes whenever `tools()` would answer differently, so a registry can keep
    its schema list cached and rebuild it only then.
    """

    @property
    def generation(self) -> int: ...

    def tools(self) -> Sequence[Tool]: ...


_Filter = tuple[tuple[str, ...] | None, tuple[str, ...]]


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


class ToolRegistry:
    """A set of tools with their API schemas cached.

    The fixed tools are given at construction; `providers` add tools that come and go (an MCP
    server connecting or dying). The schema list is rebuilt only when a provider's
    `generation` moved, so asking for it each model call costs a tuple comparison. A
    restricted view (`restricted`) follows its parent's providers too.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        providers: Iterable[ToolProvider] = (),
        *,
        _filters: tuple[_Filter, ...] = (),
    ) -> None:
        self._fixed: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._fixed:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._fixed[tool.name] = tool
        self._providers = tuple(providers)
        self._filters = _filters
        self._seen: tuple[int, ...] | None = None
        self._tools: dict[str, Tool] = {}
        self._schemas: list[dict[str, Any]] = []
        self._refresh()

    def _refresh(self) -> None:
        seen = tuple(p.generation for p in self._providers)
        if seen == self._seen:
            return
        tools = dict(self._fixed)
        for provider in self._providers:
            for tool in provider.tools():
                tools.setdefault(tool.name, tool)  # a fixed tool keeps its name
        for allow, deny in self._filters:
            tools = {
                name: t
                for name, t in tools.items()
                if (allow is None or _matches(name, allow)) and not _matches(name, deny)
            }
        self._tools = tools
        self._schemas = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools.values()
        ]
        self._seen = seen

    @property
    def names(self) -> list[str]:
        self._refresh()
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        self._refresh()
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """The `tools` parameter of the Messages API (the same list object until a provider's
        tools change)."""
        self._refresh()
        return self._schemas

    def restricted(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] = ()
    ) -> ToolRegistry:
        """A registry holding only the tools in `allow` (all if None) and not in `deny`.

        Entries may end in `*` to match a prefix (`memory_*`). Tools a provider adds later are
        filtered the same way.
        """
        allow_list = tuple(allow) if allow is not None else None
        return ToolRegistry(
            self._fixed.values(),
            self._providers,
            _filters=(*self._filters, (allow_list, tuple(deny))),
        )

    def with_tools(self, extra: Iterable[Tool]) -> ToolRegistry:
        """This registry with `extra` tools added (its allow/deny filters apply to them too)."""
        return ToolRegistry(
            [*self._fixed.values(), *extra], self._providers, _filters=self._filters
        )

    def __contains__(self, name: object) -> bool:
        self._refresh()
        return name in self._tools

    def __len__(self) -> int:
        self._refresh()
        return len(self._tools)
