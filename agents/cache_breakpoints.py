"""Where a request's prompt-cache breakpoints go, and how long what they mark is kept.

Anthropic caches the prefix of a request (tools -> system -> messages) up to each block
marked with `cache_control`, at most four marks a request. Perch spends them so that every
request reads what the requests before it wrote:
1. the end of the persona block (system block 1): the tools and the persona, the same bytes
   for every chat;
2. the end of the slowly changing block (MEMORY.md, the skills list) when there is one, so a
   memory edit rewrites from there on, never the tools and persona;
3. the block where the conversation's previous request ended (`last_sent_block`): read back
   exactly, however many blocks the last step added (the API looks back only 20 blocks from
   a mark for something cached);
4. the last block of this request, written for the next one.
Marks 1 and 2 are the `PromptBuilder`'s; `request_messages` sets 3 and 4, on copies (stored
messages never carry a mark). Whatever changes from turn to turn (the time, context recalled
for this turn) travels in the new user message, after mark 3. `CachePlan` gives the marks
their life: the system's marks first (a 1-hour mark may not follow a 5-minute one), the
conversation's after (`agents.cache_policy` chooses them). `ttl` is part of the Messages
API's `cache_control` (no beta header; the anthropic SDK 2.x types it in
`CacheControlEphemeralParam`); the API reports the 5-minute and 1-hour writes apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.model import Block, CacheControl, CacheTtl, Message, TextBlock

MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class CachePlan:
    """The life of a request's marks: `prefix` for the system's, `history` for the
    conversation's. A 1-hour mark may not follow a 5-minute one, so `prefix` is at least as
    long as `history`."""

    prefix: CacheTtl = "5m"
    history: CacheTtl = "5m"

    def __post_init__(self) -> None:
        if self.prefix == "5m" and self.history == "1h":
            raise ValueError("a 1-hour history mark cannot follow a 5-minute prefix mark")


def cache_control(ttl: CacheTtl) -> CacheControl:
    """The mark itself; 5 minutes is the API's default and left unsaid."""
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def marks_in(blocks: Sequence[Any]) -> int:
    """How many of `blocks` carry a mark."""
    return sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)


def system_blocks(system: list[TextBlock], ttl: CacheTtl) -> list[TextBlock]:
    """The system blocks with their marks set to `ttl` (the same list for 5 minutes; else
    copies that share the text, so the body encoder still finds it by identity)."""
    if ttl == "5m":
        return system
    out: list[TextBlock] = []
    for block in system:
        if "cache_control" in block:
            marked: TextBlock = {**block, "cache_control": cache_control(ttl)}
            out.append(marked)
        else:
            out.append(block)
    return out


def last_sent_block(history: Sequence[Message]) -> Block | None:
    """The block where the previous request of this conversation ended: the last block of
    its last user message (a run's requests end with the user's message or tool results;
    the assistant's final answer after them was never sent)."""
    for message in reversed(history):
        if message["role"] == "user" and message["content"]:
            return message["content"][-1]
    return None


def request_messages(
    conversation: Sequence[Message],
    *,
    anchor: Block | None,
    ttl: CacheTtl = "5m",
    room: int = 2,
    mark_end: bool = True,
) -> list[Message]:
    """The conversation as sent: consecutive same-role messages merged (a repaired history
    may end with a user message the new one joins), the `anchor` block and, with
    `mark_end`, the last block marked, within `room` marks (the end first). Copies where it
    changes anything; the messages given stay untouched."""
    merged: list[Message] = []
    for message in conversation:
        if merged and merged[-1]["role"] == message["role"]:
            previous = merged[-1]
            joined = [*previous["content"], *message["content"]]
            merged[-1] = {"role": previous["role"], "content": joined}
        else:
            merged.append(message)
    if not merged or not merged[-1]["content"]:
        return merged
    end = merged[-1]["content"][-1] if mark_end and room > 0 else None
    room -= end is not None
    targets = [b for b in (anchor if room > 0 else None, end) if b is not None]
    if not targets:
        return merged
    mark = cache_control(ttl)
    ids = {id(b) for b in targets}
    out: list[Message] = []
    for message in merged:
        blocks = message["content"]
        if not any(id(b) in ids for b in blocks):
            out.append(message)
            continue
        content: list[Any] = [{**b, "cache_control": mark} if id(b) in ids else b for b in blocks]
        out.append({"role": message["role"], "content": content})
    return out
