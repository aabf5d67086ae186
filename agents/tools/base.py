"""The tool contract: `Tool`, `ToolContext`, `ToolResult` and the `ToolRegistry`.

A tool is an object with a `name`, a `description`, a JSON-schema `input_schema` and an async
`run(args, ctx)`. Services a tool needs (cron, spawning, sending) are given to it when it is
constructed; `ToolContext` carries only what belongs to one run. A tool signals a problem the
model should read by raising `ToolError` (or returning `ToolResult(..., is_error=True)`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agents.cancel import CancelToken


class ToolError(Exception):
    """A failure the model should see as the tool's result, e.g. a refused path."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False


@dataclass(slots=True)
class ToolContext:
    """Per-run facts a tool may use.

    `origin` is an opaque string naming the chat the run serves (the gateway's business; tools
    such as `cron` store it so results go back there). `depth` is 0 for a top-level run and
    n for a sub-agent n levels down. `run_id` groups calls made by one run. `model` is the
    model the run was started with (None: the agent's default); sub-agents inherit it.
    """

    workspace: Path
    session_key: str
    cancel: CancelToken = field(default_factory=CancelToken)
    origin: str | None = None
    depth: int = 0
    run_id: str = ""
    model: str | None = None


class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


class ToolRegistry:
    """An immutable set of tools with their API schemas computed once."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
        self._schemas = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in self._tools.values()
        ]

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """The `tools` parameter of the Messages API (the same list object every call)."""
        return self._schemas

    def restricted(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] = ()
    ) -> ToolRegistry:
        """A registry holding only the tools in `allow` (all if None) and not in `deny`.

        Entries may end in `*` to match a prefix (`memory_*`).
        """

        def matches(name: str, patterns: Iterable[str]) -> bool:
            return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)

        allow_list = list(allow) if allow is not None else None
        deny_list = list(deny)
        return ToolRegistry(
            t
            for name, t in self._tools.items()
            if (allow_list is None or matches(name, allow_list)) and not matches(name, deny_list)
        )

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)
