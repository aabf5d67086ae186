"""Sub-agents: the `SubagentRunner` that runs children (DESIGN section 6); the `spawn` tool that
feeds it is `agents.spawn_tool`.

A child runs the same `AgentLoop` in its own session (`agent:<id>:sub:<depth>:<spawnId>:
<parentKey>`) with the minimal prompt and a restricted tool set: `cron`, `message`,
`memory_*`, `send_file` and `react` always denied, then the `agent.subagents.tools` policy, and `spawn` removed at
`depth == max_depth`, so the depth limit holds by construction. What the runner needs from
outside comes through two protocols the daemon implements: `ChildStore` (child session keys,
saving a child's history, adding its usage to its ancestors) and `Announcer` (delivering a
detached child's result into the parent session as a system message).

Decisions: the per-run cap counts every spawn of one run (`ctx.run_id`); the global cap
queues children (never refuses) and the timeout starts when a child gets its slot; the
configured `timeout_s` is both the default and the most a model may ask for. `wait=false`
is for top-level runs only: a sub-agent's own children always run in wait mode, because a
sub-agent session has no lane of its own to announce into. A child that is cancelled (by
`/stop` of its parent run or shutdown) is saved but not announced.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.cancel import Cancelled, CancelToken
from agents.loop import AgentLoop, RunRequest, RunResult
from agents.model import text_block
from agents.prompt import PromptBuilder, RuntimeInfo
from agents.sanitize import sanitize_output
from agents.spawn_tool import SpawnTool
from agents.subagent_ports import (
    SPAWN_TOOL,
    Announcer,
    ChildStore,
    SubagentLimits,
    SubagentStatus,
)
from agents.tools.base import ToolContext, ToolError, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

ALWAYS_DENIED: tuple[str, ...] = ("cron", "message", "memory_*", "send_file", "react")
"""Tools no sub-agent ever gets: scheduling, talking to people, and long-term memory."""

_RUNS_REMEMBERED = 4096  # per-run spawn counters kept (oldest forgotten first)
_LABEL_CHARS = 60


@dataclass(slots=True)
class _Child:
    spawn_id: str
    key: str
    parent_key: str
    label: str
    task: str
    depth: int
    origin: str | None
    workspace: Path
    token: CancelToken
    timeout_s: float
    detached: bool
    model: str | None = None
    timed_out: bool = False
    private: tuple[str, ...] = ()  # the parent run's (agents.tools.base.ToolContext)


class SubagentRunner:
    """Starts, limits, times out, cancels and reports sub-agents for the whole daemon."""

    def __init__(
        self,
        loop: AgentLoop,
        prompts: PromptBuilder,
        store: ChildStore,
        announcer: Announcer,
        *,
        tools: ToolRegistry,
        agent_id: str,
        limits: SubagentLimits | None = None,
        timezone: str = "UTC",
        model: str | None = None,
        gate: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.loop = loop
        self.prompts = prompts
        self.store = store
        self.announcer = announcer
        self.agent_id = agent_id
        self.limits = limits or SubagentLimits()
        self.timezone = timezone
        self.model = model  # None: a child uses its parent's model
        # The main agent's tools: those given plus `spawn`; children get restricted views.
        self.tools = tools.with_tools([SpawnTool(self)])
        self._slots = asyncio.Semaphore(self.limits.max_concurrent)
        self._per_run: OrderedDict[str, int] = OrderedDict()
        self._children: dict[str, _Child] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running = 0
        self.gate = gate  # why no sub-agent may start now (the spending guard), or ""

    def tools_for(self, depth: int) -> ToolRegistry:
        """The tools of a child at `depth` (1 for a direct child of a top-level run)."""
        deny = [*ALWAYS_DENIED, *self.limits.deny]
        if depth >= self.limits.max_depth:
            deny.append(SPAWN_TOOL)
        return self.tools.restricted(self.limits.allow, deny)

    def status(self) -> SubagentStatus:
        return SubagentStatus(self._running, len(self._children) - self._running)

    # -- spawning -------------------------------------------------------------------------

    async def spawn(
        self,
        task: str,
        ctx: ToolContext,
        *,
        label: str = "",
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Run `task` in a child of `ctx`'s session; see the module docstring for the rules."""
        limits = self.limits
        label = _label(label, task)
        if ctx.depth >= limits.max_depth:
            log.warning(
                "spawn refused for %s: depth %d is the limit (agent.max_spawn_depth=%d)",
                ctx.session_key,
                ctx.depth,
                limits.max_depth,
            )
            raise ToolError(
                f"cannot spawn {label!r}: this agent is at sub-agent depth {ctx.depth}, the "
                f"limit set by agent.max_spawn_depth ({limits.max_depth}); do the task yourself"
            )
        if self.gate is not None and (why := await self.gate()):
            raise ToolError(f"cannot spawn {label!r} now: {why}")
        run = ctx.run_id or ctx.session_key
        spawned = self._per_run.get(run, 0)
        if spawned >= limits.max_children_per_run:
            log.warning(
                "spawn refused for %s (run %s): %d sub-agents already started this run "
                "(agent.subagents.max_children_per_run=%d)",
                ctx.session_key,
                run,
                spawned,
                limits.max_children_per_run,
            )
            raise ToolError(
                f"cannot spawn {label!r}: this run already started {spawned} sub-agents, the "
                f"limit (agent.subagents.max_children_per_run={limits.max_children_per_run}); "
                "wait for their results or do the rest yourself"
            )
        self._count(run, spawned + 1)
        detached = not wait and ctx.depth == 0
        if not wait and not detached:
            log.info("spawn from sub-agent %s: wait=false runs in wait mode", ctx.session_key)
        spawn_id = uuid.uuid4().hex[:10]
        child = _Child(
            spawn_id=spawn_id,
            key=self.store.child_key(ctx.session_key, spawn_id),
            parent_key=ctx.session_key,
            label=label,
            task=task,
            depth=ctx.depth + 1,
            origin=ctx.origin,
            workspace=ctx.workspace,
            token=ctx.cancel.child(),
            timeout_s=self._timeout(timeout_s),
            detached=detached,
            model=self.model or ctx.model,
            private=ctx.private,
        )
        self._children[child.key] = child
        log.info(
            "sub-agent %r spawned by %s as %s (%s, timeout %g s)",
            label,
            ctx.session_key,
            child.key,
            "announce" if detached else "wait",
            child.timeout_s,
        )
        if detached:
            self._track(asyncio.create_task(self._run_and_announce(child), name=child.key))
            accepted = {"status": "accepted", "spawnId": spawn_id, "label": label}
            return ToolResult(json.dumps(accepted))
        running = self._track(asyncio.create_task(self._run(child), name=child.key))
        try:
            # Shielded: when the parent run is cancelled the child winds down (its token is a
            # child of the parent's) and still saves its history.
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            child.token.cancel("the parent run ended")
            raise

    def cancel_children_of(self, session_key: str, reason: str = "cancelled by user") -> int:
        """Cancel every running or queued child spawned by `session_key`; returns how many."""
        doomed = [
            c
            for c in self._children.values()
            if c.parent_key == session_key and not c.token.cancelled
        ]
        for child in doomed:
            child.token.cancel(reason)
        return len(doomed)

    async def join(self, timeout: float = 5.0) -> bool:
        """Wait until every child started so far has ended; False if `timeout` came first."""
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return True
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        return not pending

    async def aclose(self, timeout: float = 5.0) -> None:
        """Shutdown: cancel every child and wait (bounded) for them to save their history."""
        for child in list(self._children.values()):
            child.token.cancel("the service is restarting")
        if not await self.join(timeout):
            log.warning("some sub-agents did not end within %g s of being cancelled", timeout)

    # -- internals -------------------------------------------------------------------------

    def _count(self, run: str, n: int) -> None:
        self._per_run[run] = n
        self._per_run.move_to_end(run)
        while len(self._per_run) > _RUNS_REMEMBERED:
            self._per_run.popitem(last=False)

    def _timeout(self, requested: float | None) -> float:
        cap = self.limits.timeout_s
        if requested is None:
            return cap
        return min(requested, cap)

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run_and_announce(self, child: _Child) -> None:
        outcome = await self._run(child)
        if child.token.cancelled and not child.timed_out:
            log.info("sub-agent %s was cancelled; nothing to announce", child.key)
            return
        verb = "failed" if outcome.is_error else "finished"
        text = f'Sub-agent "{child.label}" (spawnId {child.spawn_id}) {verb}:\n{outcome.content}'
        try:
            await self.announcer.announce(child.parent_key, child.origin, text)
        except Exception:
            log.exception("announcing sub-agent %s to %s failed", child.key, child.parent_key)

    async def _run(self, child: _Child) -> ToolResult:
        try:
            return await self._run_child(child)
        except Exception as exc:
            log.exception("sub-agent %s crashed", child.key)
            return ToolResult(
                f'sub-agent "{child.label}" failed: {type(exc).__name__}: {exc}', True
            )
        finally:
            self._children.pop(child.key, None)

    async def _run_child(self, child: _Child) -> ToolResult:
        try:
            if self._slots.locked():
                log.info(
                    "sub-agent %s queued: all %d slots are busy (agent.subagents.max_concurrent)",
                    child.key,
                    self.limits.max_concurrent,
                )
                await child.token.race(self._slots.acquire())
            else:
                child.token.check()
                await self._slots.acquire()  # free: returns at once, so siblings see it taken
        except Cancelled as exc:
            log.info("sub-agent %s cancelled while queued: %s", child.key, exc.reason)
            return ToolResult(f'sub-agent "{child.label}" was cancelled: {exc.reason}', True)
        self._running += 1
        run_id = uuid.uuid4().hex[:12]
        timer = asyncio.get_running_loop().call_later(child.timeout_s, self._expire, child)
        started = time.monotonic()
        try:
            result = await self.loop.run(self._request(child, run_id))
        finally:
            timer.cancel()
            self._running -= 1
            self._slots.release()
        seconds = time.monotonic() - started
        await self.store.save_child(child.key, result, run_id=run_id, origin=child.origin or "")
        await self.store.add_usage(child.parent_key, result.usage)
        log.info(
            "sub-agent %s: %s in %.2fs, %d iterations, %d+%d tokens, $%.4f (added to %s)",
            child.key,
            "timeout" if child.timed_out else result.status,
            seconds,
            result.iterations,
            result.usage.input_tokens,
            result.usage.output_tokens,
            result.usage.cost_usd,
            child.parent_key,
        )
        return _outcome(child, result)

    def _expire(self, child: _Child) -> None:
        if child.token.cancelled:
            return
        child.timed_out = True
        log.warning(
            "sub-agent %s (%r) of %s timed out after %g s",
            child.key,
            child.label,
            child.parent_key,
            child.timeout_s,
        )
        child.token.cancel(f"timed out after {child.timeout_s:g} s")

    def _request(self, child: _Child, run_id: str) -> RunRequest:
        runtime = RuntimeInfo(
            agent_id=self.agent_id,
            session_key=child.key,
            model=child.model or self.loop.model,
            timezone=self.timezone,
            extra=f"You are sub-agent {child.label!r} (depth {child.depth}); your final "
            "answer is returned to the agent that started you, not shown to a person.",
        )
        return RunRequest(
            session_key=child.key,
            system=self.prompts.build("minimal", runtime),
            history=[],
            user_content=[*self.prompts.turn_context(runtime), text_block(child.task)],
            tools=self.tools_for(child.depth),
            context=ToolContext(
                workspace=child.workspace,
                session_key=child.key,
                cancel=child.token,
                origin=child.origin,
                depth=child.depth,
                run_id=run_id,
                model=child.model,
                private=child.private,
            ),
            cancel=child.token,
            model=child.model,
        )


def _outcome(child: _Child, result: RunResult) -> ToolResult:
    name = f'sub-agent "{child.label}"'
    if child.timed_out:
        return ToolResult(f"{name} timed out after {child.timeout_s:g} s", True)
    if result.status == "cancelled":
        return ToolResult(f"{name} was cancelled: {child.token.reason or 'cancelled'}", True)
    if result.status == "error":
        return ToolResult(f"{name} failed: {result.error}", True)
    text = sanitize_output(result.text).strip()
    return ToolResult(text or f"{name} finished without a text answer")


def _label(label: str, task: str) -> str:
    text = " ".join((label or task).split())
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"
