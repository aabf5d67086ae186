"""What the pages show, shaped from the store's rows and the daemon's status: pure functions.

`conversation(messages)` is a session as its user saw it: user text as sent, the assistant's
text through the delivery path's cleaning (`bot.kernel.delivery.clean_reply`: sanitized, NO_REPLY
silent), each tool call folded with its result; reasoning is left out. `runs_in_flight`
lists the runs of every live instance (this one from its lanes, the others from their last
beat), `session_line` one row of the Sessions page. The templates escape every string.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.model import Message
from agents.prompt import is_turn_context
from bot.kernel.delivery import clean_reply
from bot.kernel.sessions import SessionKey
from bot.store.rows import InstanceRow, SessionRow

FOLD_CHARS = 4000  # a tool call's input or result shown up to this many characters


def when(at: float | None) -> str:
    """A time as the CLI prints it (`2026-05-01 14:03`, local), or "-"."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "-"


def ago(at: float, now: float | None = None) -> str:
    seconds = max((time.time() if now is None else now) - at, 0)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 129600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


@dataclass(slots=True)
class ToolFold:
    id: str
    name: str
    input: str
    result: str = ""
    is_error: bool = False
    answered: bool = False


@dataclass(slots=True)
class Entry:
    role: str  # "user" | "assistant"
    text: str
    tools: list[ToolFold] = field(default_factory=list)
    images: int = 0


def _clip(text: str) -> str:
    return text if len(text) <= FOLD_CHARS else text[:FOLD_CHARS] + f"… ({len(text)} chars)"


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return ""


def conversation(messages: Iterable[Message]) -> list[Entry]:
    """The session as its user saw it, tool calls folded into the assistant's entries."""
    entries: list[Entry] = []
    calls: dict[str, ToolFold] = {}
    for message in messages:
        texts: list[str] = []
        entry = Entry(message["role"], "")
        for block in message["content"]:
            kind = block.get("type")
            if kind == "text":
                text = str(block.get("text", ""))
                if not (message["role"] == "user" and is_turn_context(text)):  # not the user's
                    texts.append(text)
            elif kind == "image":
                entry.images += 1
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input", {}), indent=1, ensure_ascii=False)
                fold = ToolFold(
                    str(block.get("id", "")), str(block.get("name", "")), _clip(arguments)
                )
                calls[fold.id] = fold
                entry.tools.append(fold)
            elif kind == "tool_result":
                fold_found = calls.get(str(block.get("tool_use_id", "")))
                if fold_found is not None:
                    fold_found.result = _clip(_result_text(block.get("content")))
                    fold_found.is_error = bool(block.get("is_error"))
                    fold_found.answered = True
        text = "\n\n".join(t for t in texts if t.strip())
        entry.text = clean_reply(text) if entry.role == "assistant" and text else text
        if entry.text.strip() or entry.tools or entry.images:
            entries.append(entry)
    return entries


@dataclass(frozen=True, slots=True)
class RunLine:
    session: str
    runs: int
    where: str  # "this instance" or host pid
    local: bool


def runs_in_flight(
    own_lanes: Mapping[str, Any], instances: Iterable[InstanceRow], own_id: str
) -> list[RunLine]:
    """Every live instance's running sessions: this one's lanes now, the others' last beat."""
    lines = [
        RunLine(key, int(lane.get("active", 0)), "this instance", True)
        for key, lane in sorted(own_lanes.items())
        if lane.get("active")
    ]
    for instance in instances:
        if instance.id == own_id:
            continue
        runs = instance.detail.get("runs") or {}
        where = f"{instance.host} pid {instance.pid}"
        lines += [RunLine(k, int(n), where, False) for k, n in sorted(runs.items()) if n]
    return lines


@dataclass(frozen=True, slots=True)
class InstanceLine:
    host: str
    pid: int
    since: str
    seen: str
    channels: list[tuple[str, str]]  # (name, up | down | standby | leader)
    active_runs: int
    queued: int
    this: bool


def instance_line(instance: InstanceRow, own_id: str, now: float) -> InstanceLine:
    detail = instance.detail
    standby, leads = set(detail.get("standby", [])), set(detail.get("leads", []))
    states = []
    for name, up in (detail.get("channels") or {}).items():
        state = "standby" if name in standby else ("up" if up else "down")
        states.append((name, "leader" if up and name in leads else state))
    return InstanceLine(
        instance.host,
        instance.pid,
        when(instance.started_at),
        ago(instance.seen_at, now),
        states,
        int(detail.get("active_runs", 0)),
        int(detail.get("queued", 0)),
        instance.id == own_id,
    )


@dataclass(frozen=True, slots=True)
class SessionLine:
    key: str
    platform: str
    chat: str
    updated: str
    updated_at: float
    messages: int
    cost: float
    running: bool
    agent: str = "-"  # the agent the session belongs to (`agents:`)


def session_line(row: SessionRow, messages: int, running: bool) -> SessionLine:
    platform, chat, agent = "-", row.key, "-"
    try:
        key = SessionKey.parse(row.key)
    except ValueError:
        key = None
    if key is not None:
        root = key.root
        agent = key.agent
        platform = root.channel or root.kind
        chat = root.chat_id or (root.job_id or root.kind)
        if key.kind == "sub":
            chat = f"sub-agent of {chat}"
    return SessionLine(
        row.key,
        platform,
        chat,
        when(row.updated_at),
        row.updated_at,
        messages,
        row.cost_usd,
        running,
        agent,
    )
