"""The agent loop: think -> act -> observe with a `ModelClient` and a `ToolRegistry`.

`AgentLoop.run(request, emit)` streams a model response, runs the tool calls of that response
concurrently (`MAX_PARALLEL_TOOLS` at once, at most `MAX_TOOL_CALLS`; results kept in call
order), feeds the results back, and repeats until the model answers without tools or
`max_iterations` is reached. It never touches storage or a platform: it returns a
`RunResult` whose `new_messages` the caller persists in one transaction, and reports
progress as events (`TextDelta`, `ToolStarted`, `ToolProgress`, `ToolFinished`); a tool reports
its own progress through `ToolContext.progress`; an `agents.approval.ToolGate`, when given,
decides before each tool runs (and may wait for a person's approval: the wait is cancelled
like the tool); the loop's `RunObserver`
(`agents.observer`: metrics and traces) is told of the run and of each tool call, with the
tool running inside the watch, so what the tool starts belongs to it. Images a tool returns go
into its tool_result for this run's model calls; `new_messages` carries notes in their
place (`agents.tool_images`), so no stored history keeps their base64.

Cancellation is cooperative through the request's `CancelToken`: checked before each model
call and each tool, raced against both. A cancelled run keeps the partial text it streamed,
answers every `tool_use` (with its result or "cancelled by user"), and ends with a valid
history. Steering messages (queue mode `steer`) are merged into the conversation just before
the next model call.

Requests are built for the prompt cache (`agents.cache_breakpoints`): each one marks the block
where the conversation's previous request ended and its own last block, with the lives the
request's `CachePlan` gives. What a request sends is what later requests send again: a tool
call's long input is cut (`agents.history_inputs`) as the call enters the conversation, not
one turn later. `allowed_tools`, when set, limits what the run may call while the request
still offers every tool (the memory flush reads the chat's cached prefix that way).

A request the API refuses for good (`ModelError.rejected_for_good`: 400, 413, 422) ends the
run with `RunResult.rejected` set, so the caller keeps the run's messages out of the history
it sends next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agents.approval import ToolGate
from agents.cache_breakpoints import (
    MAX_BREAKPOINTS,
    CachePlan,
    last_sent_block,
    marks_in,
    request_messages,
    system_blocks,
)
from agents.cancel import Cancelled, CancelToken
from agents.history_inputs import cut_long_inputs
from agents.loop_events import (
    Event,
    EventSink,
    ModelCallFinished,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from agents.model import (
    Block,
    Message,
    ModelClient,
    ModelError,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    text_block,
    text_of,
    tool_result_block,
)
from agents.observer import NO_OBSERVER, RunObserver
from agents.surrogates import fix_data, fix_text
from agents.tool_images import without_tool_images
from agents.tools.base import ToolContext, ToolError, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

CANCELLED_RESULT = "cancelled by user"
# One model response's tool calls run at most this many at once (in call order) ...
MAX_PARALLEL_TOOLS = 8
# ... and at most this many are run: a response asking for more (a hostile or looping model)
# gets an error result for the rest, so one response cannot start thousands of processes.
MAX_TOOL_CALLS = 64
TOO_MANY_CALLS = (
    "Error: not run: at most {n} tool calls are run per response; ask for fewer at a time."
)
CUT_OFF_NOTE = "[The model reached its output limit here; ask it to go on.]"
REFUSED_NOTE = "[The model's provider stopped this answer (a content filter or refusal).]"
UNFINISHED_CALL = (
    "Error: not run: your response reached the output limit while writing this call, so its "
    "input may be incomplete. Make the call again, with less text around it if needed."
)
MAX_ITERATIONS_NOTE = (
    "I stopped after {n} steps without finishing. Say 'continue' if you want me to go on."
)


RunStatus = Literal["ok", "cancelled", "error", "max_iterations"]


class SteerInbox:
    """Messages that arrive for a running session in `steer` mode, taken before each call."""

    def __init__(self) -> None:
        self._pending: list[list[Block]] = []

    def put(self, content: list[Block]) -> None:
        self._pending.append(content)

    def drain(self) -> list[list[Block]]:
        pending, self._pending = self._pending, []
        return pending

    def __len__(self) -> int:
        return len(self._pending)


@dataclass(slots=True)
class RunRequest:
    session_key: str
    system: list[TextBlock]
    history: list[Message]
    user_content: list[Block]
    tools: ToolRegistry
    context: ToolContext
    cancel: CancelToken = field(default_factory=CancelToken)
    steer: SteerInbox | None = None
    model: str | None = None
    max_iterations: int | None = None
    cache: CachePlan = field(default_factory=CachePlan)
    allowed_tools: frozenset[str] | None = None  # None: every tool offered may be called


@dataclass(slots=True)
class RunResult:
    status: RunStatus
    text: str
    new_messages: list[Message]
    usage: Usage
    context_tokens: int = 0
    iterations: int = 0
    error: str = ""
    streamed: bool = False
    model: str = ""
    rejected: ModelError | None = None  # the API refused the run's request for good


class AgentLoop:
    """Runs turns for one agent configuration; safe to share between concurrent runs."""

    def __init__(
        self,
        client: ModelClient,
        model: str,
        *,
        max_iterations: int = 20,
        max_tokens: int = 8192,
        max_tool_result_chars: int = 50_000,
        observer: RunObserver = NO_OBSERVER,
        gate: ToolGate | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        self.client = client
        self.model = model
        self.max_iterations = max_iterations
        self.max_tokens = max_tokens
        self.max_tool_result_chars = max_tool_result_chars
        self.observer = observer
        self.gate = gate  # approvals: asked before each tool runs (agents.approval)
        self.redact = redact  # every tool result passes it before the model, history or a trace

    async def run(self, request: RunRequest, emit: EventSink | None = None) -> RunResult:
        with self.observer.agent_run(request.session_key, request.context.depth) as watch:
            result = await self._run(request, emit)
            watch.finished(result.status, result.usage)
            return result

    async def _run(self, request: RunRequest, emit: EventSink | None) -> RunResult:
        model = request.model or self.model
        max_iterations = request.max_iterations or self.max_iterations
        cancel = request.cancel
        user: Message = {"role": "user", "content": list(request.user_content)}
        conversation: list[Message] = [*request.history, user]
        new: list[Message] = [user]
        usage = Usage()
        context_tokens = 0
        streamed = False
        final_text = ""

        async def send(event: Event) -> None:
            if emit is not None:
                await emit(event)

        def result(
            status: RunStatus,
            text: str,
            error: str = "",
            n: int = 0,
            rejected: ModelError | None = None,
        ) -> RunResult:
            # Tool-result images were for this run's model calls: notes from here on.
            saved = without_tool_images(new)
            return RunResult(
                status, text, saved, usage, context_tokens, n, error, streamed, model, rejected
            )

        partial: list[str] = []

        async def on_text(delta: str) -> None:
            nonlocal streamed
            delta = fix_text(delta)
            partial.append(delta)
            streamed = True
            await send(TextDelta(delta))

        system = system_blocks(request.system, request.cache.prefix)
        room = MAX_BREAKPOINTS - marks_in(system)
        anchor = last_sent_block(request.history)  # where this session's last request ended
        for iteration in range(1, max_iterations + 1):
            if request.steer is not None:
                for content in request.steer.drain():
                    _merge_user_content(conversation, new, content)
            if cancel.cancelled:
                return result("cancelled", final_text, n=iteration - 1)

            partial.clear()

            messages = request_messages(
                conversation, anchor=anchor, ttl=request.cache.history, room=room
            )
            anchor = conversation[-1]["content"][-1]  # the next request reads up to here
            call = ModelRequest(
                model=model,
                system=system,
                messages=messages,
                tools=request.tools.schemas(),
                max_tokens=self.max_tokens,
            )
            try:
                response = await cancel.race(self.client.complete(call, on_text))
            except Cancelled:
                text = "".join(partial)
                if text.strip():
                    _append(conversation, new, {"role": "assistant", "content": [text_block(text)]})
                return result("cancelled", text, n=iteration)
            except ModelError as exc:
                log.warning("model call failed: %s", exc)
                refused = exc if exc.rejected_for_good else None
                return result("error", "", str(exc), iteration, refused)

            usage.add(response.usage)
            if response.model and response.model != model:
                # A fallback answered: the rest of this turn stays with it.
                log.info("model %s answered instead of %s", response.model, model)
                model = response.model
            context_tokens = response.usage.context_tokens + response.usage.output_tokens
            # A lone surrogate from the model would make this history unsendable: U+FFFD.
            content = [fix_data(b) for b in response.content if not _empty_text(b)]
            final_text = text_of(content)
            tool_uses = [b for b in content if b["type"] == "tool_use"]
            await send(ModelCallFinished(iteration, final_text, len(tool_uses)))
            if content:  # long tool inputs cut now, so every later request sends the same
                (said,) = cut_long_inputs([{"role": "assistant", "content": content}])
                _append(conversation, new, said)
            cut = response.stop_reason == "max_tokens"  # the output limit ended the response
            if not tool_uses:
                if cut:  # say so: a reply that stops mid-sentence (or never starts) misleads
                    final_text = f"{final_text}\n\n{CUT_OFF_NOTE}" if final_text else CUT_OFF_NOTE
                elif response.stop_reason == "refusal" and not final_text:
                    final_text = REFUSED_NOTE  # a content filter ended it: not plain silence
                return result("ok", final_text, n=iteration)

            # A response cut off inside its last tool call carries that call's input half
            # written (a truncated path, command or file): it is answered, never run.
            unfinished = tool_uses[-1]["id"] if cut and content[-1]["type"] == "tool_use" else ""
            results = await self._run_tools(tool_uses, request, send, unfinished)
            _append(conversation, new, {"role": "user", "content": results})
            if cancel.cancelled:
                return result("cancelled", final_text, n=iteration)

        note = MAX_ITERATIONS_NOTE.format(n=max_iterations)
        _append(conversation, new, {"role": "assistant", "content": [text_block(note)]})
        return result("max_iterations", note, n=max_iterations)

    async def _run_tools(
        self, calls: list[ToolUseBlock], request: RunRequest, send: EventSink, unfinished: str = ""
    ) -> list[Block]:
        async def one(call: ToolUseBlock) -> ToolResultBlock:
            call_id, name = call["id"], call["name"]
            args: Any = call.get("input")
            if request.cancel.cancelled:
                return tool_result_block(call_id, CANCELLED_RESULT, True)
            if call_id == unfinished:
                return tool_result_block(call_id, UNFINISHED_CALL, True)
            await send(ToolStarted(call_id, name, args if isinstance(args, dict) else {}))
            started = time.monotonic()

            async def progress(fraction: float | None, message: str = "") -> None:
                await send(ToolProgress(call_id, name, fraction, message))

            context = replace(request.context, progress=progress)
            arguments = args if isinstance(args, dict) else {}
            known = request.tools.get(name) is not None
            with self.observer.tool_call(call_id, name, arguments, known) as watch:
                outcome = await self._run_tool(name, args, request, context)
                outcome = replace(outcome, content=self.redact(outcome.content))
                cancelled = request.cancel.cancelled and outcome.content == CANCELLED_RESULT
                watch.finished(outcome.is_error, outcome.content, cancelled=cancelled)
            await send(ToolFinished(call_id, name, outcome.is_error, time.monotonic() - started))
            content = fix_text(self._cap(name, outcome.content)) or "(empty)"
            return tool_result_block(call_id, content, outcome.is_error, outcome.images)

        if len(calls) == 1:
            return [await one(calls[0])]
        slots = asyncio.Semaphore(MAX_PARALLEL_TOOLS)

        async def bounded(call: ToolUseBlock) -> ToolResultBlock:
            async with slots:
                return await one(call)

        run, refused = calls[:MAX_TOOL_CALLS], calls[MAX_TOOL_CALLS:]
        if refused:
            log.warning(
                "model asked for %d tool calls in one response; ran %d", len(calls), len(run)
            )
        results: list[Block] = list(await asyncio.gather(*(bounded(c) for c in run)))
        note = TOO_MANY_CALLS.format(n=MAX_TOOL_CALLS)
        return results + [tool_result_block(c["id"], note, True) for c in refused]

    async def _run_tool(
        self, name: str, args: Any, request: RunRequest, context: ToolContext
    ) -> ToolResult:
        tool = request.tools.get(name)
        allowed = request.allowed_tools
        if tool is not None and allowed is not None and name not in allowed:
            usable = ", ".join(sorted(allowed)) or "none"
            return ToolResult(f"Error: {name} cannot be used now; only: {usable}.", True)
        if tool is None:
            available = ", ".join(request.tools.names) or "none"
            return ToolResult(f"Unknown tool {name!r}. Available tools: {available}.", True)
        if not isinstance(args, dict):
            return ToolResult(f"Tool {name!r} needs a JSON object as input.", True)
        try:
            if self.gate is not None:  # asks first where the policy says so
                return await request.cancel.race(self.gate.run(tool, args, context))
            return await request.cancel.race(tool.run(args, context))
        except Cancelled:
            return ToolResult(CANCELLED_RESULT, True)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", True)
        except Exception as exc:  # a broken tool must not break the run
            log.exception("tool %s failed", name)
            return ToolResult(f"Error: tool {name!r} failed: {type(exc).__name__}: {exc}", True)

    def _cap(self, name: str, content: str) -> str:
        limit = self.max_tool_result_chars
        if len(content) <= limit:
            return content
        return (
            content[:limit]
            + f"\n\n[OUTPUT TRUNCATED: showed {limit} of {len(content)} characters from {name}]"
        )


def _empty_text(block: Block) -> bool:
    return block["type"] == "text" and not block["text"].strip()


def _append(conversation: list[Message], new: list[Message], message: Message) -> None:
    conversation.append(message)
    new.append(message)


def _merge_user_content(
    conversation: list[Message], new: list[Message], content: list[Block]
) -> None:
    """Add steering text to the last user message (roles must keep alternating)."""
    last = conversation[-1]
    if last["role"] == "user":
        last["content"] = [*last["content"], *content]
    else:
        _append(conversation, new, {"role": "user", "content": list(content)})
