"""Heartbeats: the agent wakes on its own, reads HEARTBEAT.md, and speaks only when needed.

`Heartbeat.tick()` is one heartbeat (the scheduler calls it every `heartbeat.every`): outside
`active_hours`, with a HEARTBEAT.md that has no real content, or while the heartbeat session
(or the target chat) is busy it returns without a model call; the next tick tries again.
Otherwise it runs a turn in `agent:<id>:heartbeat` (history trimmed to the last few
heartbeat runs, so it never grows) and delivers the reply to `heartbeat.target` through
`bot.kernel.delivery.send_reply(kind="heartbeat")`, which drops NO_REPLY and HEARTBEAT_OK with at
most 300 characters left. `resolve_target` also serves cron
jobs: where `owner`, `last`, `none` or an explicit chat point right now.

Decisions: an active-hours window `HH:MM-HH:MM` includes its start and excludes its end;
start == end means all day; a window whose end is before its start wraps midnight.
HTML comments are removed before the checklist is shown to the model (the shipped template
keeps its examples in comments). HEARTBEAT.md is read through the one opener
(`agents.workspace_files`): a symlink or hard link in its place counts as an empty file. `owner` is `bot.kernel.owner.resolve_owner`: the first owner id
of the running channels in registry order, as a DM (the console's user counts too). A
target that cannot be resolved skips the heartbeat with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from agents.workspace_files import read_file
from bot.config.schema import Config, HeartbeatTarget
from bot.kernel.delivery import DeliveryError
from bot.kernel.owner import resolve_owner
from bot.kernel.ports import Outbox, SystemTurns
from bot.kernel.routing import decode_chat, parse_target
from bot.kernel.sessions import SessionKey
from bot.store.roles import History, Sessions
from channels.base import Channel, ChatRef

log = logging.getLogger(__name__)


class HeartbeatStore(Sessions, History, Protocol):
    """The heartbeat's session and the chats it may speak in."""


HeartbeatOutcome = Literal[
    "outside_hours", "empty", "no_target", "busy", "silent", "delivered", "cancelled", "error"
]
Clock = Callable[[], datetime]

HEARTBEAT_FILE = "HEARTBEAT.md"
KEEP_RUNS = 3  # heartbeat runs kept in the heartbeat session's history
MAX_CHECKLIST_CHARS = 20_000

HEARTBEAT_PROMPT = """\
[Heartbeat] It is {now}. Work through the checklist from HEARTBEAT.md below. If nothing \
needs the owner's attention right now, reply exactly HEARTBEAT_OK. Otherwise reply with only \
the message for the owner (without HEARTBEAT_OK). Do not repeat what you already told the \
owner in earlier heartbeats.

--- HEARTBEAT.md ---
{checklist}"""

# -- HEARTBEAT.md --------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HEADING = re.compile(r"#{1,6}(\s.*)?")
_EMPTY_ITEM = re.compile(r"(?:[-*+]|\d+[.)])\s*(?:\[[ xX]?\])?")
_RULE = re.compile(r"[-=*_\s]+")


def strip_comments(text: str) -> str:
    """Remove HTML comments (an unclosed one runs to the end of the text)."""
    return _COMMENT.sub("", text)


def _is_real_line(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    if _HEADING.fullmatch(stripped) or _EMPTY_ITEM.fullmatch(stripped):
        return False
    return not _RULE.fullmatch(stripped)


def has_content(text: str) -> bool:
    """True unless the file holds only headings, blank lines, comments, empty list items or
    checkboxes (`- [ ]`), and rules: then a heartbeat would have nothing to do."""
    return any(_is_real_line(line) for line in strip_comments(text).splitlines())


def checklist(text: str) -> str:
    """What the model is shown: the file without comments, or "" when it has no content."""
    if not has_content(text):
        return ""
    lines = [line.rstrip() for line in strip_comments(text).splitlines()]
    shown = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if len(shown) > MAX_CHECKLIST_CHARS:
        shown = shown[:MAX_CHECKLIST_CHARS] + "\n[... HEARTBEAT.md truncated]"
    return shown


# -- active hours --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveHours:
    start: time
    end: time

    @classmethod
    def parse(cls, text: str) -> ActiveHours:
        """`08:00-22:00` (validated by the config); `22:00-06:00` wraps midnight."""
        try:
            first, last = (part.strip() for part in text.split("-"))
            return cls(time.fromisoformat(first), time.fromisoformat(last))
        except ValueError:
            raise ValueError(
                f"active hours {text!r} must look like 08:00-22:00 (HH:MM-HH:MM)"
            ) from None

    def contains(self, moment: time) -> bool:
        moment = moment.replace(second=0, microsecond=0, tzinfo=None)
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= moment < self.end
        return moment >= self.start or moment < self.end


# -- targets -------------------------------------------------------------------------------


class TargetError(Exception):
    """A delivery target that points nowhere right now; the message says how to fix it."""


def _owner(config: Config, channels: Mapping[str, Channel]) -> ChatRef:
    chat = resolve_owner(config, channels)
    if chat is None:
        raise TargetError(
            "there is no owner to deliver to: put your own user id first in allow_from of an "
            "enabled channel (channels.<name>.allow_from), or set heartbeat.target / "
            "the job's deliver_to to a chat"
        )
    return chat


async def _last(store: Sessions, channels: Mapping[str, Channel]) -> ChatRef:
    for origin in await store.recent_origins(50):
        chat = decode_chat(origin)
        if chat is not None and chat.channel in channels:
            return chat
    raise TargetError("target 'last': no chat on a running channel has talked to the bot yet")


async def resolve_target(
    target: str | HeartbeatTarget,
    *,
    config: Config,
    channels: Mapping[str, Channel],
    store: Sessions,
) -> ChatRef | None:
    """The chat `target` points to now; None for `none`. TargetError when there is none."""
    accounts = {name: channel.account for name, channel in channels.items()}
    chat: ChatRef | None
    if isinstance(target, HeartbeatTarget):
        try:
            chat = parse_target(f"{target.channel}:{target.to}", accounts)
        except ValueError as exc:
            raise TargetError(f"target {target.channel}:{target.to}: {exc}") from None
    elif target == "none":
        return None
    elif target == "owner":
        chat = _owner(config, channels)
    elif target == "last":
        chat = await _last(store, channels)
    elif target.startswith("{"):
        chat = decode_chat(target)
        if chat is None:
            raise TargetError(f"target {target!r} is not a chat address")
    else:
        try:
            chat = parse_target(target, accounts)
        except ValueError as exc:
            raise TargetError(str(exc)) from None
    if chat.channel not in channels:
        running = ", ".join(sorted(channels)) or "none"
        raise TargetError(f"channel {chat.channel!r} is not running (running: {running})")
    return chat


# -- the heartbeat itself ------------------------------------------------------------------


async def trim_history(store: HeartbeatStore, key: SessionKey, keep_runs: int) -> None:
    """Keep only the messages of the session's last `keep_runs` runs (whole runs)."""
    session = await store.find_session(str(key))
    if session is None:
        return
    await store.trim_runs(session.id, keep_runs)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Heartbeat:
    """One agent's heartbeat. `clock` returns an aware datetime (injectable for tests)."""

    def __init__(
        self,
        config: Config,
        turns: SystemTurns,
        outbox: Outbox,
        store: HeartbeatStore,
        *,
        clock: Clock = _utc_now,
        keep_runs: int = KEEP_RUNS,
    ) -> None:
        self.config = config
        self.turns = turns
        self.outbox = outbox
        self.store = store
        self.clock = clock
        self.keep_runs = keep_runs
        self.key = SessionKey.heartbeat(config.agent.id)
        self.last_outcome: HeartbeatOutcome | None = None
        self._running = False

    @property
    def timezone(self) -> str:
        return self.config.heartbeat.timezone or self.config.agent.timezone

    @property
    def path(self) -> Path:
        return self.config.workspace / HEARTBEAT_FILE

    async def tick(self) -> HeartbeatOutcome:
        """One heartbeat; never raises (a failure is logged and the next tick runs)."""
        if self._running:
            return self._done("busy")
        self._running = True
        try:
            return self._done(await self._tick())
        except Exception:
            log.exception("heartbeat failed; the next one runs as scheduled")
            return self._done("error")
        finally:
            self._running = False

    def _done(self, outcome: HeartbeatOutcome) -> HeartbeatOutcome:
        self.last_outcome = outcome
        log.debug("heartbeat: %s", outcome)
        return outcome

    async def _tick(self) -> HeartbeatOutcome:
        cfg = self.config.heartbeat
        now = self.clock().astimezone(ZoneInfo(self.timezone))
        if cfg.active_hours and not ActiveHours.parse(cfg.active_hours).contains(now.time()):
            return "outside_hours"
        shown = checklist(await asyncio.to_thread(_read, self.config.workspace))
        if not shown:
            return "empty"
        turns = self.turns
        try:
            chat = await resolve_target(
                cfg.target, config=self.config, channels=self.outbox.channels, store=self.store
            )
        except TargetError as exc:
            log.warning("heartbeat skipped: %s", exc)
            return "no_target"
        agent = self.config.agent.id
        if turns.is_busy(self.key) or (
            chat is not None and turns.is_busy(SessionKey.for_chat(agent, chat))
        ):
            return "busy"
        await trim_history(self.store, self.key, self.keep_runs)
        prompt = HEARTBEAT_PROMPT.format(
            now=now.strftime("%A %Y-%m-%d %H:%M ") + self.timezone, checklist=shown
        )
        outcome = await turns.run_system_turn(self.key, prompt, when_busy="skip", mode="full")
        if outcome is None:
            return "busy"
        result = outcome.result
        if result is None or result.status == "error":
            error = result.error if result is not None else "the turn did not run"
            log.error("heartbeat: the model call failed (%s); the next heartbeat runs", error)
            return "error"
        if result.status == "cancelled":
            return "cancelled"
        if chat is None:
            return "silent"
        try:
            sent = await self.outbox.send(chat, result.text, kind="heartbeat")  # counted
        except DeliveryError as exc:
            log.error("heartbeat: %s", exc)
            return "error"
        if not sent:
            return "silent"
        log.info("heartbeat: message sent to %s %s", chat.channel, chat.chat_id)
        return "delivered"


def _read(workspace: Path) -> str:
    """HEARTBEAT.md through the one opener: a symlink or hard link there reads as empty."""
    data = read_file(workspace, (HEARTBEAT_FILE,), MAX_CHECKLIST_CHARS * 4)
    return "" if data is None else data.decode("utf-8", errors="replace")
