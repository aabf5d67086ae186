"""What the loop needs from a model, independent of any SDK: the provider-neutral protocol.

Content is typed blocks (`TextBlock`, `ImageBlock`, `ToolUseBlock`, `ToolResultBlock`, and
`ThinkingBlock` that an Anthropic model may return and wants back): `TypedDict`s, so they are
plain dicts at run time. A turn converts nothing: the same objects go to the Anthropic SDK,
into SQLite as JSON (`dumps_content` / `loads_content`) and back. Other wire formats (Chat
Completions) are produced by their provider from these blocks per request.

A `ModelClient` streams one response for a `ModelRequest`, reporting text deltas to a
callback as they arrive, and returns a `ModelResponse` with content blocks, a stop reason and
`Usage`. It fails only with `ModelError`, whose `kind` classifies the failure and whose
`retryable` says whether another attempt (or another model) may succeed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Protocol, TypedDict, cast

Role = Literal["user", "assistant"]
CacheTtl = Literal["5m", "1h"]


class CacheControl(TypedDict):
    """A prompt-cache breakpoint (`agents.cache_breakpoints`); no `ttl` means 5 minutes."""

    type: Literal["ephemeral"]
    ttl: NotRequired[CacheTtl]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class ImageSource(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class ImageBlock(TypedDict):
    type: Literal["image"]
    source: ImageSource
    cache_control: NotRequired[CacheControl]


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: NotRequired[CacheControl]


class ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock]
    is_error: NotRequired[bool]
    cache_control: NotRequired[CacheControl]


class ThinkingBlock(TypedDict):
    """`thinking` (with `thinking`, `signature`) or `redacted_thinking` (with `data`): kept
    opaque and sent back to Anthropic as received; other kinds drop it."""

    type: Literal["thinking", "redacted_thinking"]
    thinking: NotRequired[str]
    signature: NotRequired[str]
    data: NotRequired[str]
    cache_control: NotRequired[CacheControl]


Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock


class Message(TypedDict):
    role: Role
    content: list[Block]


TextCallback = Callable[[str], Awaitable[None]]


# ---- constructors and readers (no copies: blocks are dicts) -------------------------------
# Every block Perch makes is made here; code elsewhere reads `block["type"]` but writes no
# block literals. Wire formats of other APIs (Chat Completions parts) are their provider's.
def text_block(text: str, *, cached: bool = False) -> TextBlock:
    """A text block; `cached` marks the end of a prefix for Anthropic's prompt cache."""
    if cached:
        return {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    return {"type": "text", "text": text}


def image_block(media_type: str, data: str) -> ImageBlock:
    """An image given as base64 `data` of `media_type` (`image/png`, ...)."""
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def tool_use_block(id: str, name: str, input: dict[str, Any]) -> ToolUseBlock:
    """A model's call of tool `name` with arguments `input`; `id` pairs it with its result."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_result_block(
    tool_use_id: str, content: str, is_error: bool = False, images: Iterable[ImageBlock] = ()
) -> ToolResultBlock:
    """A tool_result; with `images`, its content is the text block followed by them."""
    parts: list[TextBlock | ImageBlock] = [*images]
    body: str | list[TextBlock | ImageBlock] = [text_block(content), *parts] if parts else content
    block: ToolResultBlock = {"type": "tool_result", "tool_use_id": tool_use_id, "content": body}
    if is_error:
        block["is_error"] = True
    return block


def text_of(content: Iterable[Block]) -> str:
    """The concatenated text blocks of a message's content."""
    return "".join(b["text"] for b in content if b["type"] == "text")


def tool_result_text(block: ToolResultBlock) -> str:
    """A tool result's content as text (image parts become a short marker)."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    parts = [p["text"] if p["type"] == "text" else "[image]" for p in content]
    return "\n".join(parts)


# ---- JSON (the store's format: exactly the blocks above) ----------------------------------
def dumps_content(content: list[Block]) -> str:
    """A message's content as the JSON text the store keeps."""
    return json.dumps(content, ensure_ascii=False)


def loads_content(raw: str) -> list[Block]:
    """Content read back from the store. Only the shape is checked (a list of objects);
    `agents.history.prepare_history` repairs anything else before a model sees it."""
    data = json.loads(raw)
    if isinstance(data, str):
        return [text_block(data)]
    if not isinstance(data, list):
        raise ValueError(f"stored message content is {type(data).__name__}, not a list")
    return cast(list[Block], [b for b in data if isinstance(b, dict)])


# ---- usage, request, response --------------------------------------------------------------
@dataclass(slots=True)
class Usage:
    """Tokens of one call or more. `input_tokens` are the prompt's uncached tokens;
    `cache_write_tokens` were written to the prompt cache, `cache_write_1h_tokens` of them
    for an hour (priced apart, `agents.pricing`); `cache_read_tokens` were read from it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    cache_write_1h_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_write_1h_tokens += other.cache_write_1h_tokens
        self.cost_usd += other.cost_usd

    @property
    def context_tokens(self) -> int:
        """Tokens the prompt of the call occupied (what counts against the window)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call. `model` is what the client was asked for: a bare name for a single-provider
    client, `<provider>/<model>` for the router (`agents.providers.router`)."""

    model: str
    system: list[TextBlock]
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None


@dataclass(slots=True)
class ModelResponse:
    content: list[Block]
    stop_reason: str
    usage: Usage
    model: str = ""  # the model that answered, in the form the request named it


ErrorKind = Literal[
    "overloaded",  # 529 / overloaded_error
    "rate_limit",  # 429
    "server",  # 5xx, 408, 409, retryable mid-stream errors
    "timeout",
    "unreachable",  # DNS failure, connection refused or reset before any answer
    "auth",  # 401, 403
    "not_found",  # 404: unknown model or endpoint
    "bad_request",  # 400, 413, 422 ...
    "billing",  # 402
    "broken_stream",  # failed after text was delivered: never retried
]

# Failures another model (possibly of another provider) may not share.
FALLBACK_KINDS: frozenset[str] = frozenset(
    {"overloaded", "rate_limit", "server", "timeout", "unreachable", "not_found"}
)


# A request the API refuses with one of these will be refused again, however often it is sent:
# its content (an image, a document, a tool's result, its size) is what the API will not take.
REJECTED_STATUSES: frozenset[int] = frozenset({400, 413, 422})


class ModelError(Exception):
    """A model call failed for good. `str()` is a message fit to show a user; `detail` is
    what the API itself said (its error message), when it said anything."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        kind: ErrorKind = "bad_request",
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.kind: ErrorKind = kind
        self.detail = detail

    @property
    def rejected_for_good(self) -> bool:
        """The API refused this request's content (400, 413, 422): sending the same again
        fails again, so the caller must leave it out of what it sends next."""
        return not self.retryable and self.status in REJECTED_STATUSES

    @property
    def may_fall_back(self) -> bool:
        """Whether the turn may move on to a fallback model."""
        return self.kind in FALLBACK_KINDS


class ModelClient(Protocol):
    """Streams one model response; `on_text` receives text deltas as they arrive.

    Implementations retry transient failures themselves, but never once any text has reached
    `on_text` (the user may have seen it). Raises `ModelError` when giving up.
    """

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse: ...

    async def warm(self) -> None:
        """Load what the first request would load (SDK, client); called once in the background."""

    async def aclose(self) -> None: ...
