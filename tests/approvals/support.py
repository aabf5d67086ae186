"""What the approval tests share: a daemon whose model runs `exec`, and reading back what the
model was told (the tool results of its last request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.daemon import Daemon
from bot.store.rows import ApprovalRow
from tests.fakes.anthropic import FakeAnthropic, Reply


def exec_settings(**approvals: Any) -> dict[str, Any]:
    """Config overrides: exec on (unsandboxed: the test's files are its own), approvals."""
    return {
        "agent.exec": {"enabled": True, "sandbox": "none"},
        "agent.approvals": {"timeout": "30s", **approvals},
    }


def workspace_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "workspace" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("keep me?")
    return path


def script_exec(model: FakeAnthropic, command: str, after: str = "done") -> None:
    """The model's next turn: run `command`, then say `after`."""
    model.queue(Reply.tool_use([("exec", {"command": command})]), Reply.text(after))


def last_tool_result(model: FakeAnthropic) -> str:
    """The text of the last tool_result the model was sent."""
    for message in reversed(model.requests[-1]["messages"]):
        content = message.get("content")
        for block in reversed(content if isinstance(content, list) else []):
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    return "".join(b.get("text", "") for b in inner)
                return str(inner)
    raise AssertionError("the model was sent no tool result")


async def audit(daemon: Daemon) -> list[ApprovalRow]:
    assert daemon.store is not None
    return list(reversed(await daemon.store.approvals()))
