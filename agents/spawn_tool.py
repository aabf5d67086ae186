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
                    "description": "true (default): its answer is this tool's result; false: "
                    "it comes later as a system message.",
                },
                "timeout_s": {
                    "type": "number",
                    "description": "Give up after this many seconds (default and most: "
                    f"{runner.limits.timeout_s:g}).",
                },
            },
            "required": ["task"],
        }
        self.runner = runner
        limits = runner.limits
        self.description = (
            "Start a sub-agent: a fresh worker with fewer tools that does one self-contained "
            "task and reports back. It sees neither this conversation nor your memory: put "
            "all it needs in task. Several spawns in one response run in parallel; at most "
            f"{limits.max_children_per_run} per turn."
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
