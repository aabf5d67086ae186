"""The rows and constants of the store's roles (`bot/store/roles.py`), in a module of their own.

Plain dataclasses a backend returns, the errors it raises, the columns `perch store
migrate` copies, and the one place that knows how a message is stored (`encode_message`,
`decode_message`). Import them from here (`bot.store.rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agents.model import Message, dumps_content, loads_content

RunStatus = Literal["ok", "delivered", "error", "skipped", "missed"]
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
INBOX_LEASE = 30.0  # seconds an inbox row stays with its instance without a heartbeat


# What `perch store migrate` copies, table by table in this order (parents first), and the
# columns every backend dumps and loads (booleans as bool, times as float seconds).
COPY_COLUMNS: dict[str, tuple[str, ...]] = {
    "sessions": ("id", "key", "archived", "created_at", "updated_at", "summary", "compactions",
                 "model", "input_tokens", "output_tokens", "cache_read_tokens",
                 "cache_write_tokens", "cost_usd", "context_tokens", "origin"),
    "messages": ("id", "session_id", "role", "content", "run_id", "created_at", "rejected"),
    "inbox": ("id", "channel", "account", "chat_id", "message_id", "session_key", "payload",
              "status", "received_at", "done_at"),
    "usage": ("id", "session_key", "run_id", "model", "input_tokens", "output_tokens",
              "cache_read_tokens", "cache_write_tokens", "cost_usd", "created_at"),
    "pairing": ("channel", "code", "sender_id", "sender_name", "created_at", "expires_at"),
    "approved_senders": ("channel", "sender_id", "approved_at"),
    "cron_jobs": ("id", "name", "schedule_kind", "schedule", "tz", "message", "session_mode",
                  "session_key", "deliver_to", "enabled", "created_at", "created_by",
                  "next_run_at", "last_run_at", "last_status", "last_error", "failures"),
    "cron_runs": ("id", "job_id", "started_at", "finished_at", "status", "detail"),
    "session_models": ("session_key", "model", "updated_at"),
    "approvals": ("id", "created_at", "session_key", "origin", "tool", "summary", "requester",
                  "approver", "instance", "status", "decided_by", "decided_at", "reason",
                  "remembered"),
    "channel_state": ("channel", "name", "value", "updated_at"),
}  # fmt: skip
BOOL_COLUMNS = frozenset(
    {("sessions", "archived"), ("cron_jobs", "enabled"), ("approvals", "remembered")}
)
CopyRow = tuple[Any, ...]


class AlreadyRunning(RuntimeError):
    """Another Perch daemon serves this store."""


class StoreUnavailable(ConnectionError):
    """The database server cannot be reached or refuses us; the message says what to check."""


class SchemaTooNew(RuntimeError):
    """The database was upgraded by a newer Perch than this one: this code must not touch it."""

    def __init__(self, where: str, found: int, known: int) -> None:
        super().__init__(
            f"{where}: the database is at schema {found}, but this Perch knows schemas up to "
            f"{known}: a newer Perch upgraded it. Run that version again, or restore the "
            "backup taken before the upgrade (perch store backup; see docs/upgrades.md)"
        )
        self.found = found
        self.known = known


@dataclass(slots=True)
class SessionRow:
    id: str
    key: str
    summary: str
    compactions: int
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    context_tokens: int
    origin: str
    created_at: float
    updated_at: float


@dataclass(slots=True)
class InboxRow:
    id: int
    channel: str
    account: str
    chat_id: str
    message_id: str
    session_key: str
    payload: dict[str, Any]
    received_at: float


@dataclass(slots=True)
class PairingRequest:
    channel: str
    code: str
    sender_id: str
    sender_name: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class CronJobRow:
    """A `cron_jobs` row as stored; `bot.cron.jobs` turns it into a `CronJob`."""

    id: str
    name: str
    schedule_kind: str
    schedule: str
    tz: str
    message: str
    session_mode: str
    deliver_to: str
    enabled: bool
    created_at: float
    created_by: str = ""
    next_run_at: float | None = None
    last_run_at: float | None = None
    last_status: str = ""
    last_error: str = ""
    failures: int = 0


@dataclass(frozen=True, slots=True)
class CronRun:
    job_id: str
    started_at: float
    finished_at: float
    status: RunStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class UsageDay:
    """The usage ledger summed over one UTC day (`YYYY-MM-DD`) and one model."""

    day: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class InstanceRow:
    """A running daemon as it last reported itself (`perch status` lists the live ones)."""

    id: str
    host: str
    pid: int
    started_at: float
    seen_at: float
    detail: dict[str, Any]


def encode_message(message: Message) -> tuple[str, str]:
    """(role, JSON content) as stored; the one place that knows the stored shape."""
    return message["role"], dumps_content(message["content"])


def decode_message(role: str, content: str) -> Message:
    return {
        "role": "assistant" if role == "assistant" else "user",
        "content": loads_content(content),
    }


ApprovalStatus = Literal["pending", "approved", "denied", "timeout", "cancelled", "restart"]
APPROVAL_COLUMNS = COPY_COLUMNS["approvals"]


@dataclass(slots=True)
class ApprovalRow:
    """One approval request and, once answered, its decision (the audit `perch approvals`
    lists). `approver` is `<channel>:<platform id>` of whoever may answer; `decided_by` the
    same form for who did ("" for a timeout, a /stop or a restart); `origin` the chat the
    turn runs in (`bot.kernel.routing.encode_chat`); `remembered`: answered "always"."""

    id: str
    created_at: float
    session_key: str
    origin: str
    tool: str
    summary: str
    requester: str
    approver: str
    instance: str = ""
    status: ApprovalStatus = "pending"
    decided_by: str = ""
    decided_at: float | None = None
    reason: str = ""
    remembered: bool = False
