"""A turn whose request the model API refused for good: what the user is told, what is kept.

The API refuses some requests whatever the timing (400, 413, 422: an image or PDF it will not
take, a request too large, a malformed block; `ModelError.rejected_for_good`). Sent again,
such a request fails again, so a chat that kept it in its history would answer every next
message with the same error. The turn (`bot.hub.turns`) therefore saves the run's messages marked
with `rejection_mark` (the store keeps them and never reads them back into a history) and
tells the user, in plain words, what was refused and that the chat goes on without it. A run
refused after a tool's result joined the request is handled the same way: the whole run, its
tool calls and results included, leaves the history.
"""

from __future__ import annotations

from agents.model import Message, ModelError

MAX_DETAIL = 300  # characters of the API's own message quoted to the user

# (words in the API's message, what the user is told was refused); the first match wins
_CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("too large", "too long", "too big", "exceeds", "maximum", "too many"), "it is too large"),
    (("image",), "the model could not take an image in it"),
    (("pdf", "document"), "the model could not take a document in it"),
    (
        ("media type", "media_type", "mime", "file type", "unsupported"),
        "it holds a kind of file the model does not take",
    ),
)


def rejection_mark(error: ModelError) -> str:
    """What the store keeps as the rejected messages' mark: the status and the API's reason
    (never empty, so it always marks)."""
    said = error.detail.strip() or error.kind
    return f"{error.status or 0}: {said}"[:500]


def rejected_reply(error: ModelError, messages: list[Message]) -> str:
    """The user's notice for a turn whose request the API refused for good (`messages`: the
    run's messages, which tell whether a tool's result was in it)."""
    detail = " ".join(error.detail.split())[:MAX_DETAIL]
    what = "your message" if not _has_tool_result(messages) else "a tool's result in this turn"
    cause = _cause(error.status, detail.lower())
    said = f" (the API said: {detail})" if detail else ""
    return (
        f"The model API refused {what}{cause} ({error.status}){said}. "
        "I have left it out of our conversation, so your next message will be answered "
        "without it."
    )


def _cause(status: int | None, detail: str) -> str:
    if status == 413:
        return ": it is too large"
    for words, cause in _CAUSES:
        if any(word in detail for word in words):
            return f": {cause}"
    return ""


def _has_tool_result(messages: list[Message]) -> bool:
    return any(
        block.get("type") == "tool_result"
        for message in messages
        if message["role"] == "user"
        for block in message["content"]
    )
