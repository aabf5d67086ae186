"""The history pipeline: stored messages made fit for the next model call.

Owns turn limiting, tool-result pruning (soft trim, then hard clear), repair of
tool_use/tool_result pairing and the Messages-API validity check. Pure functions over the
Anthropic-shaped dicts of `agents.model`; inputs are never mutated, outputs are new dicts.

Decisions (where the seed is silent):
- Entries that are not dicts are dropped by every stage. `max_turns <= 0` keeps every turn.
  A user turn is a user message with anything besides tool_result blocks.
- Tokens are estimated as characters / 4 plus 1,600 per image (`agents.history_size`).
- Protected from pruning: the first user message, and everything from the
  `keep_last_assistants`-th last assistant message on (which holds the results answering them).
- `min_hard_clear_chars` is the total size of the old (prunable) tool results below which hard
  clearing is not worth it, as in OpenClaw. Soft trimming caps each result near
  `keep_head + keep_tail`, so a per-result minimum of 50,000 would never fire; the default is
  10,000 characters (about 2,500 tokens).
- Bytes once sent never change (for the prompt cache): inputs are cut and results capped as
  a run makes them (`agents.loop`); pruning runs only past `PRUNE_RATIO` of the window, where
  compaction (at 75%) has normally shortened the history already: a safety net.
- Repair moves tool_result blocks to the front of their user message (the API requires it),
  puts a merged assistant message's tool_use blocks last, drops blocks a role may not carry
  (tool_use from users, tool_result and images from the assistant), drops duplicate tool_use
  ids, and answers a trailing assistant tool_use with a synthesised user message. A valid
  history comes back unchanged. Text content given as a plain string becomes a text block.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from agents import model
from agents.history_check import ASSISTANT_BLOCKS as _ASSISTANT_BLOCKS
from agents.history_check import ROLES as _ROLES
from agents.history_check import USER_BLOCKS as _USER_BLOCKS
from agents.history_check import validate_history
from agents.history_images import age_out_images
from agents.history_inputs import cut_long_inputs
from agents.history_size import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    block_chars_and_images,
    chars_and_images,
    estimate_tokens,
)

# Stored content is untrusted JSON: the stages read messages and blocks as plain dicts,
# defensively, and hand back `agents.model.Message`s (the same dicts, typed at the exit).
Block = dict[str, Any]
Message = dict[str, Any]
Messages = Sequence[Mapping[str, Any]]

SOFT_RATIO = 0.3  # share of the context window above which old tool results are trimmed
PRUNE_RATIO = 0.8  # share of the window above which `prepare_history` prunes at all
CLEARED_TOOL_RESULT = "[Old tool result content cleared]"
MISSING_TOOL_RESULT = "[Tool result missing -- session was compacted]"

__all__ = [
    "estimate_tokens",
    "limit_turns",
    "prepare_history",
    "prune_tool_results",
    "repair_tool_pairing",
    "user_turn_starts",
    "validate_history",
]


# ---------------------------------------------------------------------------------------------
# Small readers and copiers.


def _blocks(message: Mapping[str, Any]) -> list[Block]:
    content = message.get("content")
    if isinstance(content, str):
        return [cast(Block, model.text_block(content))]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _copy_block(block: Block) -> Block:
    copied = dict(block)
    if isinstance(copied.get("content"), list):
        copied["content"] = [dict(b) if isinstance(b, dict) else b for b in copied["content"]]
    return copied


def _copy_message(message: Message) -> Message:
    copied = dict(message)
    copied["content"] = [_copy_block(b) for b in _blocks(message)]
    return copied


def _typed(messages: list[Message]) -> list[model.Message]:
    """The exit of every stage: checked dicts, now typed (no copy)."""
    return cast(list[model.Message], messages)


def _copy_messages(messages: Iterable[Any]) -> list[Message]:
    """Copies of the messages; entries that are not dicts are dropped."""
    return [_copy_message(m) for m in messages if isinstance(m, dict)]


def _is_tool_result(block: Block) -> bool:
    return block.get("type") == "tool_result"


def _is_user_turn(message: Message) -> bool:
    if message.get("role") != "user":
        return False
    return any(not _is_tool_result(b) for b in _blocks(message))


def _tool_use_ids(message: Message) -> list[str]:
    return [b["id"] for b in _blocks(message) if b.get("type") == "tool_use" and "id" in b]


# ---------------------------------------------------------------------------------------------
# Stage 1: limit turns.


def user_turn_starts(messages: Messages) -> list[int]:
    """Indexes of the messages that start a user turn (what `limit_turns` counts)."""
    return [i for i, m in enumerate(messages) if isinstance(m, dict) and _is_user_turn(m)]


def limit_turns(messages: Messages, max_turns: int) -> list[model.Message]:
    """Keep the last `max_turns` user turns and everything after the first of them."""
    return _typed(_copy_messages(_last_turns(messages, max_turns)))


def _last_turns(messages: Messages, max_turns: int) -> list[Message]:
    """`limit_turns` without copying: the kept messages themselves."""
    kept = [m for m in messages if isinstance(m, dict)]
    if max_turns <= 0:
        return kept
    turn_starts = [i for i, m in enumerate(kept) if _is_user_turn(m)]
    start = turn_starts[-max_turns] if len(turn_starts) > max_turns else 0
    return kept[start:]


# ---------------------------------------------------------------------------------------------
# Stage 2: prune tool results.


def _soft_trim(text: str, keep_head: int, keep_tail: int) -> str:
    omitted = len(text) - keep_head - keep_tail
    return f"{text[:keep_head]}\n\n[... {omitted} characters trimmed ...]\n\n{text[-keep_tail:]}"


def _soft_trim_result(block: Block, over: int, keep_head: int, keep_tail: int) -> int:
    """Trim a tool_result block in place (a copy); returns the characters saved."""
    content = block.get("content")
    saved = 0
    if isinstance(content, str) and len(content) > over:
        block["content"] = _soft_trim(content, keep_head, keep_tail)
        saved = len(content) - len(block["content"])
    elif isinstance(content, list):
        for inner in content:
            text = inner.get("text") if isinstance(inner, dict) else None
            if isinstance(text, str) and len(text) > over:
                inner["text"] = _soft_trim(text, keep_head, keep_tail)
                saved += len(text) - len(inner["text"])
    return saved


def prune_tool_results(
    messages: Messages,
    context_window_tokens: int,
    *,
    soft_ratio: float = SOFT_RATIO,
    hard_ratio: float = 0.5,
    keep_last_assistants: int = 3,
    soft_trim_over: int = 4000,
    keep_head: int = 1500,
    keep_tail: int = 1500,
    min_hard_clear_chars: int = 10_000,
) -> list[model.Message]:
    """Shrink old tool results when the history fills too much of the context window.

    Over `soft_ratio` of the window, old results longer than `soft_trim_over` keep only their
    head and tail; still over `hard_ratio`, old results are replaced, oldest first, by
    "[Old tool result content cleared]" until under it.
    """
    result = _copy_messages(messages)
    if context_window_tokens <= 0 or not result:
        return _typed(result)
    chars, images = chars_and_images(result)

    def ratio() -> float:
        tokens = -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS
        return tokens / context_window_tokens

    if ratio() < soft_ratio:
        return _typed(result)

    protected_from = len(result)
    assistants = [i for i, m in enumerate(result) if m.get("role") == "assistant"]
    if keep_last_assistants > 0 and assistants:
        protected_from = assistants[-min(keep_last_assistants, len(assistants))]
    first_user = next((i for i, m in enumerate(result) if m.get("role") == "user"), None)
    prunable: list[Block] = [
        block
        for i, message in enumerate(result[:protected_from])
        if i != first_user and message.get("role") == "user"
        for block in message["content"]
        if _is_tool_result(block)
    ]

    for block in prunable:
        chars -= _soft_trim_result(block, soft_trim_over, keep_head, keep_tail)
    if ratio() < hard_ratio:
        return _typed(result)
    if sum(block_chars_and_images(b)[0] for b in prunable) < min_hard_clear_chars:
        return _typed(result)
    for block in prunable:
        if ratio() < hard_ratio:
            break
        block_chars, block_images = block_chars_and_images(block)
        if block.get("content") == CLEARED_TOOL_RESULT:
            continue
        block["content"] = CLEARED_TOOL_RESULT
        chars += len(CLEARED_TOOL_RESULT) - block_chars
        images -= block_images
    return _typed(result)


# ---------------------------------------------------------------------------------------------
# Stage 3: repair tool pairing.


def _clean_block(block: Block, role: str, seen_tool_ids: set[str]) -> Block | None:
    """A copy of `block` if `role` may carry it as it is, else None (dropped)."""
    kind = block.get("type")
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    if not isinstance(kind, str) or kind not in allowed:
        return None
    if kind == "text":
        text = block.get("text")
        return _copy_block(block) if isinstance(text, str) and text.strip() else None
    if kind == "tool_use":
        tool_id, name = block.get("id"), block.get("name")
        if not (isinstance(tool_id, str) and tool_id and isinstance(name, str) and name):
            return None
        if tool_id in seen_tool_ids or not isinstance(block.get("input", {}), dict):
            return None
        seen_tool_ids.add(tool_id)
        copied = _copy_block(block)
        copied.setdefault("input", {})
        return copied
    if kind == "tool_result":
        tool_id = block.get("tool_use_id")
        if not (isinstance(tool_id, str) and tool_id):
            return None
        copied = _copy_block(block)
        content = copied.get("content")
        if content is not None and not isinstance(content, str | list):
            copied["content"] = json.dumps(content, ensure_ascii=False, default=str)
        return copied
    return _copy_block(block)


def _normalise(messages: Messages) -> list[Message]:
    seen_tool_ids: set[str] = set()
    out: list[Message] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            continue
        role = message["role"]
        content = [
            cleaned
            for block in _blocks(message)
            if (cleaned := _clean_block(block, role, seen_tool_ids)) is not None
        ]
        if content:
            out.append({**message, "content": content})
    return out


def _order_assistant(content: list[Block]) -> list[Block]:
    return [b for b in content if b.get("type") != "tool_use"] + [
        b for b in content if b.get("type") == "tool_use"
    ]


def _merge_same_role(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            content = out[-1]["content"] + message["content"]
            if message["role"] == "assistant":
                content = _order_assistant(content)
            out[-1] = {**out[-1], "content": content}
        else:
            out.append(message)
    return out


def _missing_result(tool_id: str) -> Block:
    return cast(Block, model.tool_result_block(tool_id, MISSING_TOOL_RESULT, is_error=True))


def _pair_results(expected: list[str], content: list[Block]) -> list[Block]:
    """The user content answering `expected` tool_use ids: results first, orphans dropped."""
    wanted, answered = set(expected), set()
    results: list[Block] = []
    for block in content:
        if _is_tool_result(block):
            tool_id = block["tool_use_id"]
            if tool_id in wanted and tool_id not in answered:
                answered.add(tool_id)
                results.append(block)
    results += [_missing_result(t) for t in expected if t not in answered]
    return results + [b for b in content if not _is_tool_result(b)]


def repair_tool_pairing(messages: Messages) -> list[model.Message]:
    """Make a history the Messages API accepts, keeping as much of it as possible.

    Drops orphan tool_result blocks and leading messages before the first plain user message,
    synthesises results for unanswered tool_use blocks, merges same-role neighbours so roles
    alternate, and drops empty messages. Idempotent; a valid history comes back unchanged.
    """
    history = _merge_same_role(_normalise(messages))
    first_plain = next((i for i, m in enumerate(history) if _is_user_turn(m)), len(history))
    history = history[first_plain:]

    paired: list[Message] = []
    for i, message in enumerate(history):
        if message["role"] == "user":
            previous = history[i - 1] if i > 0 else None
            expected = _tool_use_ids(previous) if previous is not None else []
            content = _pair_results(expected, message["content"])
            if content:
                paired.append({**message, "content": content})
            continue
        paired.append(message)
        expected = _tool_use_ids(message)
        if expected and i + 1 == len(history):
            paired.append({"role": "user", "content": [_missing_result(t) for t in expected]})
    return _typed(_merge_same_role(paired))


# ---------------------------------------------------------------------------------------------
# The pipeline.


def prepare_history(
    messages: Messages,
    *,
    max_turns: int,
    context_window_tokens: int,
    keep_image_turns: int | None = None,
) -> list[model.Message]:
    """Limit turns, cut long tool inputs (stored runs have them cut), age out older user
    images (`agents.history_images`; None keeps them), prune tool results past
    `PRUNE_RATIO` of the window, repair pairing: the history to send to the model."""
    limited = cut_long_inputs(_last_turns(messages, max_turns))
    if keep_image_turns is not None:
        limited = age_out_images(limited, keep_image_turns)
    # The usual history is far under the pruning threshold: then nothing is copied before the
    # repair stage, which builds new dicts anyway (the inputs are still never mutated).
    window = context_window_tokens
    if window > 0 and limited and estimate_tokens(limited) / window >= PRUNE_RATIO:
        return repair_tool_pairing(prune_tool_results(limited, window))
    return repair_tool_pairing(limited)
