"""Auto-compaction: summarise old history so a long conversation keeps its context.

A session is compacted when it holds more than `max_messages` messages or its last prompt
used more than `context_ratio` of the model's context window (token counts from the API's
`usage`; a chars/4 estimate only when none is known). `Compactor.compact` first runs a
memory-flush turn (at most 5 iterations and 90 s; only the `flush_tools` may be called) so the
agent can write durable notes, then asks the model for a summary of everything but the last
`keep_last` messages (merged with any earlier summary). The caller stores the summary and
drops the summarised messages; the next turn sees the summary as a user/assistant pair
(`with_summary`). Pure of storage and platforms: it takes messages and returns a `Compaction`.

Both requests begin as the chat's own do (`ChatPrefix`: its tools, system blocks and history,
the same bytes), so they read the chat's prompt cache instead of paying for it again: the
flush offers every tool of the chat and refuses the others when called; the summary asks, in
the conversation itself, for a summary of what comes before the kept messages, marked only
where the chat's last request ended (nothing new is written). When the chat's history does
not hold every stored message (the turn limit cut it), or the model answers with no text,
the summary is asked for the old way: a transcript under a summariser's system prompt.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from agents.cache_breakpoints import (
    MAX_BREAKPOINTS,
    CachePlan,
    last_sent_block,
    marks_in,
    request_messages,
    system_blocks,
)
from agents.cancel import CancelToken
from agents.loop import AgentLoop, RunRequest
from agents.model import (
    Message,
    ModelClient,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    Usage,
    text_block,
    text_of,
    tool_result_text,
)
from agents.surrogates import fix_text
from agents.tools.base import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

FLUSH_PROMPT = (
    "[Automatic memory flush] The older part of this conversation is about to be summarised "
    "and removed from your context. If it holds anything worth keeping for the long term "
    "(facts about the user, decisions, open tasks, promises you made), store it now with "
    "memory_append (or write_file under memory/). Then reply with exactly NO_REPLY."
)
SUMMARY_ASK = (
    "[Automatic compaction] This conversation is about to be shortened: everything before "
    "{where} will be replaced by a summary you write now; that message and the ones after it "
    "stay as they are. Write the summary so that you can go on from it: who the user is, what "
    "they asked, what was decided or done (files written, reminders set), open questions and "
    "commitments, and any preferences stated.{earlier} Use short bullet points. Keep names, "
    "numbers, dates and ids exactly. Do not invent anything. Write at most about 400 words. "
    "Answer with the summary alone and call no tools."
)
SUMMARY_EARLIER = " Fold in the earlier summary the conversation starts with."
SUMMARY_ACK = "Understood. I have the summary of our earlier conversation."
SUMMARY_SYSTEM = (
    "You compress conversations. Write a faithful summary of the conversation you are "
    "given so that an assistant can continue it: who the user is, what they asked, what was "
    "decided or done (files written, reminders set), open questions and commitments, and "
    "any preferences stated. Use short bullet points. Keep names, numbers, dates and ids "
    "exactly. Do not invent anything. Write at most about 400 words."
)
FLUSH_ITERATIONS = 5
FLUSH_TIMEOUT = 90.0
SUMMARY_TIMEOUT = 120.0
SUMMARY_MAX_TOKENS = 1024
TRANSCRIPT_CHARS = 120_000
TOOL_TEXT_CHARS = 400


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    max_messages: int = 50
    context_ratio: float = 0.75
    keep_last: int = 4
    window_tokens: int = 200_000

    def due(self, message_count: int, context_tokens: int) -> bool:
        return (
            message_count > self.max_messages
            or context_tokens > self.context_ratio * self.window_tokens
        )


@dataclass(frozen=True, slots=True)
class ChatPrefix:
    """How the chat's own requests begin: its system blocks, its tools and its history as
    the next turn would send them. `complete`: that history holds every stored message."""

    system: list[TextBlock]
    tools: ToolRegistry
    history: list[Message]
    cache: CachePlan = field(default_factory=CachePlan)
    complete: bool = True


@dataclass(slots=True)
class Compaction:
    summary: str
    summarised: int  # how many leading messages the summary replaces
    usage: Usage
    flushed: bool


def with_summary(summary: str, messages: list[Message]) -> list[Message]:
    """The stored messages with the session's summary in front, as a user/assistant pair."""
    if not summary:
        return messages
    return [
        {
            "role": "user",
            "content": [text_block("[Summary of our earlier conversation]\n" + summary)],
        },
        {"role": "assistant", "content": [text_block(SUMMARY_ACK)]},
        *messages,
    ]


def split_point(messages: list[Message], keep_last: int) -> int:
    """Index where the kept tail starts: at most `keep_last` messages, beginning with a
    plain user message so the kept history stays valid on its own (0 = nothing to do)."""
    index = max(len(messages) - keep_last, 0)
    while index > 0 and not _plain_user(messages[index]):
        index -= 1
    return index


def render_transcript(messages: list[Message], limit: int = TRANSCRIPT_CHARS) -> str:
    """The conversation as plain text for the summariser (tool traffic shortened)."""
    lines: list[str] = []
    for message in messages:
        who = "User" if message["role"] == "user" else "Assistant"
        for block in message["content"]:
            if block["type"] == "text":
                if block["text"].strip():
                    lines.append(f"{who}: {block['text'].strip()}")
            elif block["type"] == "tool_use":
                args = json.dumps(block.get("input", {}), ensure_ascii=False)
                lines.append(f"[Assistant called {block.get('name')}({_short(args)})]")
            elif block["type"] == "tool_result":
                lines.append(f"[Tool result: {_short(tool_result_text(block))}]")
            elif block["type"] == "image":
                lines.append(f"{who}: [image]")
    text = "\n".join(lines)
    if len(text) > limit:
        text = "[... earliest part omitted ...]\n" + text[-limit:]
    return text


class Compactor:
    def __init__(
        self,
        loop: AgentLoop,
        client: ModelClient,
        model: str,
        policy: CompactionPolicy,
        flush_tools: Collection[str] = (),
    ) -> None:
        self.loop = loop
        self.client = client
        self.model = model
        self.policy = policy
        self.flush_tools = frozenset(flush_tools)

    async def compact(
        self,
        messages: list[Message],
        previous_summary: str,
        *,
        chat: ChatPrefix,
        context: ToolContext,
    ) -> Compaction | None:
        """Flush memories, then summarise; None when there is too little to compact."""
        cut = split_point(messages, self.policy.keep_last)
        if cut == 0:
            return None
        usage = Usage()
        flushed = await self._flush(chat, context, usage)
        model = context.model or self.model  # the session's own model (/model), if chosen
        summary = ""
        if chat.complete:
            summary = await self._summarise_in_chat(
                chat, messages[cut], previous_summary, usage, model
            )
        if not summary:
            summary = await self._summarise(messages[:cut], previous_summary, usage, model)
        return Compaction(summary, cut, usage, flushed)

    async def _flush(self, chat: ChatPrefix, context: ToolContext, usage: Usage) -> bool:
        allowed = frozenset(name for name in self.flush_tools if name in chat.tools)
        if not allowed:
            return False
        cancel = CancelToken()
        request = RunRequest(
            session_key=context.session_key,
            system=chat.system,
            history=chat.history,
            user_content=[text_block(FLUSH_PROMPT)],
            tools=chat.tools,
            context=ToolContext(
                workspace=context.workspace,
                session_key=context.session_key,
                cancel=cancel,
                origin=context.origin,
                depth=context.depth,
                run_id=context.run_id,
                model=context.model,
                private=context.private,  # another person's flush writes no owner's note
            ),
            cancel=cancel,
            model=context.model,
            max_iterations=FLUSH_ITERATIONS,
            cache=chat.cache,
            allowed_tools=allowed,
        )
        task = asyncio.ensure_future(self.loop.run(request))
        try:
            result = await asyncio.wait_for(asyncio.shield(task), FLUSH_TIMEOUT)
        except TimeoutError:
            cancel.cancel("memory flush timed out")
            result = await task
        usage.add(result.usage)
        if result.status == "error":
            log.warning("memory flush failed: %s", result.error)
        return result.status == "ok"

    async def _summarise_in_chat(
        self, chat: ChatPrefix, first_kept: Message, previous: str, usage: Usage, model: str
    ) -> str:
        """The summary asked for inside the conversation; "" when the model wrote none."""
        ask = SUMMARY_ASK.format(
            where=f'the user\'s message that begins "{_opening(first_kept)}"',
            earlier=SUMMARY_EARLIER if previous else "",
        )
        system = system_blocks(chat.system, chat.cache.prefix)
        conversation: list[Message] = [
            *chat.history,
            {"role": "user", "content": [text_block(ask)]},
        ]
        request = ModelRequest(
            model=model,
            system=system,
            messages=request_messages(
                conversation,
                anchor=last_sent_block(chat.history),
                ttl=chat.cache.history,
                room=MAX_BREAKPOINTS - marks_in(system),
                mark_end=False,  # read the chat's prefix; nothing of this request is reused
            ),
            tools=chat.tools.schemas(),
            max_tokens=SUMMARY_MAX_TOKENS,
        )
        response = await self._complete(request)
        usage.add(response.usage)
        return fix_text(text_of(response.content)).strip()

    async def _summarise(self, old: list[Message], previous: str, usage: Usage, model: str) -> str:
        transcript = render_transcript(old)
        prompt = (
            (f"Earlier summary:\n{previous}\n\n" if previous else "")
            + "Conversation to summarise:\n"
            + transcript
        )
        request = ModelRequest(
            model=model,
            system=[text_block(SUMMARY_SYSTEM)],
            messages=[{"role": "user", "content": [text_block(prompt)]}],
            max_tokens=SUMMARY_MAX_TOKENS,
        )
        response = await self._complete(request)
        usage.add(response.usage)
        summary = fix_text(text_of(response.content)).strip()
        if not summary:
            raise ModelError("the model returned an empty summary")
        return summary

    async def _complete(self, request: ModelRequest) -> ModelResponse:
        try:
            return await asyncio.wait_for(self.client.complete(request), SUMMARY_TIMEOUT)
        except TimeoutError as exc:
            raise ModelError("summarising the conversation timed out") from exc


def _opening(message: Message, limit: int = 120) -> str:
    """The start of a message's text, on one line (a quote the model can find)."""
    texts = (b["text"] for b in message["content"] if b["type"] == "text")
    text = " ".join(" ".join(texts).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain_user(message: Message) -> bool:
    return message["role"] == "user" and not any(
        b["type"] == "tool_result" for b in message["content"]
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TOOL_TEXT_CHARS else text[: TOOL_TEXT_CHARS - 1] + "…"
