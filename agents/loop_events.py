"""What the agent loop reports while it runs (`agents/loop.py`): the events an `EventSink` gets.

`TextDelta` (streamed text), `ToolStarted`, `ToolProgress` (a running tool's own report),
`ToolFinished`, and `ModelCallFinished` after each model call. The delivery of a reply
(previews, typing, progress notes) is built on them; `agents.loop` re-exports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolFinished:
    id: str
    name: str
    is_error: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool said how far it is (`fraction` 0..1 when it knows the total)."""

    id: str
    name: str
    fraction: float | None
    message: str = ""


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """One model call is done; `text` is what it said (streamed deltas restart after this)."""

    iteration: int
    text: str
    tool_calls: int


Event = TextDelta | ToolStarted | ToolProgress | ToolFinished | ModelCallFinished
EventSink = Callable[[Event], Awaitable[None]]
