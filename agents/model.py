"""What the loop needs from a model, independent of any SDK.

Messages are Anthropic-shaped dicts, always with a list of content blocks:
`{"role": "user"|"assistant", "content": [{"type": "text", "text": ...}, ...]}`. Block types:
`text`, `image` (base64 source), `tool_use` (`id`, `name`, `input`) and `tool_result`
(`tool_use_id`, `content`, `is_error`). This is also the shape stored in SQLite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Block = dict[str, Any]
Message = dict[str, Any]
TextCallback = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd += other.cost_usd

    @property
    def context_tokens(self) -> int:
        """Tokens the prompt of the call occupied (what counts against the window)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    system: list[Block]
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None


@dataclass(slots=True)
class ModelResponse:
    content: list[Block]
    stop_reason: str
    usage: Usage
    model: str = ""


class ModelError(Exception):
    """A model call failed for good. `str()` is a message fit to show a user."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class ModelClient(Protocol):
    """Streams one model response; `on_text` receives text deltas as they arrive.

    Implementations retry transient failures themselves, but never once any text has reached
    `on_text` (the user may have seen it). Raises `ModelError` when giving up.
    """

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse: ...


def text_of(content: list[Block]) -> str:
    """The concatenated text blocks of a message's content."""
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")
