"""The `spawn` tool: the model's handle on the sub-agent runner (a `Spawner`).

It checks the arguments the model wrote (`task`, `label`, `wait`, `timeout_s`) and hands them to
the runner, which owns the limits, the child sessions and the announcements.
"""

from __future__ import annotations

from typing import Any

from agents.subagent_ports import SPAWN_TOOL, Spawner
from agents.tools.base import ToolContext, ToolError, ToolResult


class SpawnTool:
    """`spawn {task, label?, wait=true, timeout_s=300}`: delegate a task to a sub-agent."""

    name = SPAWN_TOOL

    def __init__(self, runner: Spawner) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "The complete instructions for the sub-agent.",
                },
                "label": {"type": "string", "description": "A short name for logs and results."},
                "wait": {
                    "type": "boolean",
                    "description": "Wait for the result (true) or get it later (false).",
                    "default": True,
                },
                "timeout_s": {
                    "type": "number",
                    "description": "Give up after this many seconds (default and maximum: the "
                    "configured agent.subagents.timeout_s, 300 unless changed).",
                },
            },
            "required": ["task"],
        }
        self.runner = runner
        limits = runner.limits
        self.description = (
            "Start a sub-agent: a fresh worker with its own context and a reduced tool set, to "
            "do one self-contained task (research, reading, drafting) and report back. Give it "
            "everything it needs in `task`: it does not see this conversation or your memory. "
            "Several spawn calls in one response run in parallel. With wait=true (default) its "
            "final answer is this tool's result; with wait=false you get "
            '{"status": "accepted", "spawnId": ...} at once and its result arrives later as a '
            f"system message. At most {limits.max_children_per_run} sub-agents per turn; "
            f"timeout {limits.timeout_s:g} s."
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            raise ToolError(
                "spawn needs 'task': the sub-agent's instructions as a non-empty string"
            )
        label = args.get("label", "")
        if not isinstance(label, str):
            raise ToolError("spawn 'label' must be a string")
        wait = args.get("wait", True)
        if not isinstance(wait, bool):
            raise ToolError("spawn 'wait' must be true or false")
        timeout = args.get("timeout_s")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ToolError("spawn 'timeout_s' must be a positive number of seconds")
        return await self.runner.spawn(
            task,
            ctx,
            label=label,
            wait=wait,
            timeout_s=float(timeout) if timeout is not None else None,
        )
