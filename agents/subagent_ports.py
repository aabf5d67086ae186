"""What the sub-agent runner shares with the daemon and its tool: its limits, its status, the
two protocols the daemon implements for it (`ChildStore`, `Announcer`), and the `Spawner`
face the `spawn` tool calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agents.loop import RunResult
from agents.model import Usage
from agents.tools.base import ToolContext, ToolResult

SPAWN_TOOL = "spawn"


@dataclass(frozen=True, slots=True)
class SubagentLimits:
    """The `agent.max_spawn_depth` and `agent.subagents` settings."""

    max_depth: int = 1
    max_children_per_run: int = 5
    max_concurrent: int = 8
    timeout_s: float = 300.0
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()


class ChildStore(Protocol):
    """Where children's sessions live (the daemon's store)."""

    def child_key(self, parent_key: str, spawn_id: str) -> str:
        """The session key of a child of `parent_key` (one level deeper)."""
        ...

    async def save_child(self, key: str, result: RunResult, *, run_id: str, origin: str) -> None:
        """Persist a finished (or cancelled) child run in its own session, with its usage."""
        ...

    async def add_usage(self, parent_key: str, usage: Usage) -> None:
        """Add a child's usage to `parent_key` and every ancestor of it."""
        ...


class Announcer(Protocol):
    """Delivers a detached (`wait=false`) child's result into its parent session."""

    async def announce(self, parent_key: str, origin: str | None, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SubagentStatus:
    running: int
    queued: int


class Spawner(Protocol):
    """What the `spawn` tool asks of the runner (`agents.subagents.SubagentRunner`)."""

    @property
    def limits(self) -> SubagentLimits: ...

    async def spawn(
        self,
        task: str,
        ctx: ToolContext,
        *,
        label: str = "",
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> ToolResult: ...
