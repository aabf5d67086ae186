"""The store's roles: what the daemon persists, as small protocols, one per concern.

A consumer depends on the roles it uses (the gateway on `Inbox`, access control on
`Pairing`, ...), never on a database: every SQL statement of the project lives in a backend
that implements all of them (`sqlite/`, the embedded default; `postgres/`, a server several
instances share). `Store` is every role at once: what `open_store` returns and the daemon's
build step hands out, one role at a time. `tests/store/test_store_contract.py` is the
behaviour every backend must show, role by role.

Guarantees every backend keeps: a run's messages and usage land in one transaction (all or
nothing, never interleaved with another run's); `inbox_add` writes a platform message once
(the second time it returns None); message content round-trips as the list of content
blocks it was saved with, in order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable
from typing import Any, Protocol

from agents.model import Message, Usage
from bot.store.rows import (
    ApprovalRow,
    ApprovalStatus,
    CopyRow,
    CronJobRow,
    CronRun,
    InboxRow,
    InstanceRow,
    PairingRequest,
    SessionRow,
    UsageDay,
)
from bot.store.search_role import Search


class Lifecycle(Protocol):
    """Opening, holding and closing the store itself."""

    lease: float  # seconds an inbox row or a claim stays with its instance without a beat
    shared: bool  # several daemons may use this store at once (PostgreSQL)

    @property
    def location(self) -> str:
        """Where the data lives, for messages (a path, or a URL without its password)."""

    @property
    def latest_schema(self) -> int:
        """The schema version this Perch migrates to."""

    async def close(self) -> None:
        """Close the store (and give up the instance claim, if held)."""

    async def hold_instance(self) -> str:
        """Join the store as a new daemon instance until `close()`; returns its id. A store
        that is not `shared` (SQLite) is held exclusively: AlreadyRunning if another daemon
        holds it, and inbox rows of earlier holders are released (they are gone). A shared
        one lets any number of instances in; their leases tell who works on what.
        """

    async def schema_version(self) -> int: ...

    async def check_writable(self) -> None:
        """Raise if a write transaction cannot be opened (read-only file, no privileges)."""


class Sessions(Protocol):
    """Conversations by key: found, listed, archived, reset, and the model each chose."""

    async def session(self, key: str) -> SessionRow:
        """The active session for `key`, created empty on first use."""

    async def find_session(self, key: str) -> SessionRow | None: ...

    async def list_sessions(self, limit: int = 100, *, archived: bool = False) -> list[SessionRow]:
        """Active sessions, most recently updated first; with `archived`, archived ones
        (`/new`) too."""

    async def recent_origins(self, limit: int = 50) -> list[str]:
        """Encoded origin chats of active sessions, most recently updated first."""

    async def archive_session(self, key: str) -> bool:
        """`/new`: archive the active session; the next message starts a fresh one."""

    async def reset_session(self, key: str) -> bool:
        """`/reset`: clear history and summary in place (usage totals stay)."""

    async def session_model(self, session_key: str) -> str:
        """The model `/model` chose for this session key ("" = the configured default)."""

    async def set_session_model(self, session_key: str, model: str) -> None:
        """Keep `model` for this session key; "" forgets the choice."""


class History(Protocol):
    """A session's messages: the turn's reads, a run's atomic write, compaction."""

    async def messages(self, session_id: str) -> list[Message]: ...

    async def messages_with_ids(self, session_id: str) -> list[tuple[int, Message]]: ...

    async def count_messages(self, session_id: str) -> int: ...

    async def recent_messages(self, session_id: str, limit: int) -> tuple[list[Message], int]:
        """The last `limit` messages, oldest first, and how many the session holds in all
        (one read: a turn loads what its turn limit can use, not the whole session)."""

    async def session_with_recent(
        self, key: str, limit: int
    ) -> tuple[SessionRow, list[Message], int]:
        """`session(key)` with `recent_messages` of it, in one read when the session exists
        (the turn's reads before its model call)."""

    async def save_run(
        self,
        session_id: str,
        session_key: str,
        messages: Iterable[Message],
        *,
        usage: Usage,
        run_id: str = "",
        model: str = "",
        context_tokens: int | None = None,
        origin: str | None = None,
        rejected: str = "",
    ) -> None:
        """Write one run's messages, the session's totals and the usage ledger atomically.
        With `rejected` (why the model API refused the run for good), the messages are kept
        marked with it, and no read of the history returns them again."""

    async def compact(self, session_id: str, summary: str, upto_id: int) -> int:
        """Replace messages up to and including `upto_id` by `summary`; rows removed."""

    async def trim_runs(self, session_id: str, keep_runs: int) -> int:
        """Keep only the messages of the session's last `keep_runs` runs; rows removed."""


class UsageLedger(Protocol):
    """Tokens and cost: the ledger per run and the totals per session."""

    async def add_session_totals(self, keys: Iterable[str], usage: Usage) -> None:
        """Add usage already in the ledger (a sub-agent's) to other sessions' totals."""

    async def add_usage(self, session_key: str, usage: Usage, *, model: str = "") -> None:
        """Add usage to a session's totals and the ledger without new messages."""

    async def usage_since(self, since: float) -> Usage: ...

    async def usage_by_day(self, since: float, *, session_prefix: str = "") -> list[UsageDay]:
        """The ledger since `since`, summed per UTC day and model; oldest day first, then
        by model. With `session_prefix` (`agent:<id>:`), only sessions whose key starts so."""


class Stops(Protocol):
    """`/stop` requests that reach runs on the other instances (`bot/cluster/stops.py`)."""

    async def stop_publish(self, session_key: str, everything: bool) -> int:
        """Ask the other instances to stop the session's oldest run (or, with `everything`,
        all its runs and waiting messages); returns the request's id."""

    async def stops_after(self, after: int | None) -> tuple[int, list[tuple[str, bool]]]:
        """Stop requests of other instances after id `after`, oldest first, as (session key,
        everything), and the id to ask after next; `after` None: none, only that id."""


class Inbox(Protocol):
    """Accepted platform messages, written before they are processed (dedupe, recovery)."""

    lease: float

    async def inbox_add(
        self,
        channel: str,
        account: str,
        chat_id: str,
        message_id: str,
        payload: dict[str, Any],
        session_key: str = "",
        *,
        received_at: float | None = None,
    ) -> int | None:
        """Record an accepted message before processing; None if it was seen before.
        The row belongs to this store's holder, leased for `lease` seconds."""

    async def inbox_claim(self, now: float | None = None) -> list[InboxRow]:
        """Take over pending rows whose lease ran out (their instance is gone): each is
        returned to exactly one claimant, leased anew; oldest first. A holder's own rows
        are not taken back (they are still in its memory)."""

    async def inbox_close(self, ids: Iterable[int], status: str = "done") -> None:
        """Finish pending rows (a closed row is never reopened)."""

    async def inbox_pending(self) -> list[InboxRow]:
        """Unfinished rows, oldest first (crash recovery reads these at start)."""

    async def inbox_prune(self, older_than: float) -> None:
        """Forget closed rows received before `older_than` (dedupe needs recent ids only)."""


class Pairing(Protocol):
    """Pairing codes and the senders they approved."""

    async def is_approved(self, channel: str, sender_id: str) -> bool: ...

    async def pairing_requests(self, channel: str | None = None) -> list[PairingRequest]:
        """Unexpired requests, oldest first."""

    async def pairing_add(self, request: PairingRequest) -> None:
        """Store a request (expired ones are dropped on the way)."""

    async def pairing_approve(self, channel: str, code: str) -> PairingRequest | None:
        """Approve a pending code (case-insensitive): the sender may write from now on."""

    async def approved_senders(self, channel: str | None = None) -> list[tuple[str, str, float]]:
        """(channel, sender id, approved at) of every sender approved by pairing."""

    async def pairing_revoke(self, channel: str, sender_id: str) -> bool:
        """Withdraw an approval; False if the sender was not approved."""

    async def pairing_deny(self, channel: str, code: str) -> PairingRequest | None:
        """Drop a pending code (case-insensitive) without approving its sender; None if
        there was no such unexpired code."""


class CronStore(Protocol):
    """Scheduled jobs and their run history."""

    async def cron_insert(self, job: CronJobRow) -> None: ...

    async def cron_get(self, job_id: str) -> CronJobRow | None: ...

    async def cron_all(self) -> list[CronJobRow]:
        """Every job, oldest first."""

    async def cron_count_enabled(self) -> int: ...

    async def cron_remove(self, job_id: str) -> bool:
        """Delete a job and its run history; False if there was none."""

    async def cron_update(
        self,
        job_id: str,
        *,
        enabled: bool,
        next_run_at: float | None,
        failures: int,
        last_run_at: float | None = None,
        last_status: str | None = None,
        last_error: str | None = None,
        run: CronRun | None = None,
    ) -> bool:
        """Set a job's state (None keeps a field), recording `run` in the same transaction.
        False if the job is gone."""

    async def cron_record_run(self, run: CronRun) -> None: ...

    async def cron_runs(self, job_id: str, limit: int = 20) -> list[CronRun]:
        """The job's most recent runs, newest first."""

    async def cron_changes(self) -> int:
        """A token that changes when another process or instance commits job changes."""


class Instances(Protocol):
    """The daemons that use the store, for `perch status` and lease renewal."""

    lease: float

    async def instance_beat(self, instance: InstanceRow) -> None:
        """Record that `instance` is alive (insert or refresh seen_at and detail) and
        renew the leases of its pending inbox rows and claims until seen_at + `lease`."""

    async def instance_gone(self, instance_id: str) -> None:
        """Forget an instance that stopped cleanly; its inbox rows and claims are free for
        the other instances at once."""

    async def instances(self, seen_since: float) -> list[InstanceRow]:
        """Instances seen at or after `seen_since`, oldest start first."""


class Claims(Protocol):
    """Claims across instances (`bot/cluster/slots.py` and `once.py` explain the uses)."""

    lease: float
    shared: bool

    async def claim(self, name: str, slot: float = 0.0, now: float | None = None) -> bool:
        """Take (`name`, `slot`) for this instance, leased for `lease` seconds and renewed
        by its beat: True if it was free, its lease had run out, or this instance holds it
        already; False if another live instance holds it or it was released as done."""

    async def release(self, name: str, slot: float = 0.0, *, done: bool) -> None:
        """Give up a claim: `done` keeps it taken for good (a cron slot that ran), else it
        is free at once for anyone."""

    async def claims_prune(self, older_than: float) -> None:
        """Forget claims taken before `older_than` that are done, and older stop requests."""

    async def claim_holders(self, name: str) -> list[str]:
        """Other instances holding a live claim named `name` (any slot)."""

    async def claim_done(self, name: str, slot: float = 0.0) -> bool:
        """Whether (`name`, `slot`) was released as done, by any instance (a once-a-day
        notice sent, a switch thrown for the day)."""

    async def leadership(self, name: str) -> bool:
        """True while this process leads `name` (e.g. a platform's single receiver): taken
        if free, kept until `close()` or the process dies. Always True on a store that
        is not `shared`. Call it again to check; a lost leadership is taken again if free."""


class Copying(Protocol):
    """Copying every row between backends (`perch store migrate`)."""

    async def is_empty(self) -> bool:
        """True if no table of `COPY_COLUMNS` holds a row."""

    def dump(self, table: str, batch: int = 500) -> AsyncIterator[list[CopyRow]]:
        """Every row of `table` in `COPY_COLUMNS[table]` order, in batches, by key."""

    async def load(self, table: str, rows: list[CopyRow]) -> None:
        """Insert dumped rows as they are (ids kept); `finish_load()` after the last."""

    async def finish_load(self) -> None:
        """Make generated ids continue after the loaded ones."""


class Approvals(Protocol):
    """Approval requests for risky tools and their decisions: the audit (bot/approvals/)."""

    async def approval_add(self, row: ApprovalRow) -> None:
        """Record a new (pending) request."""

    async def approval_decide(
        self,
        approval_id: str,
        status: ApprovalStatus,
        decided_by: str,
        reason: str = "",
        *,
        remembered: bool = False,
        at: float | None = None,
    ) -> ApprovalRow | None:
        """Close a pending request with its decision; the row as it is now, or None when no
        such request is pending (unknown, or decided already: the first answer counts)."""

    async def approval_get(self, approval_id: str) -> ApprovalRow | None: ...

    async def approvals(self, limit: int = 100) -> list[ApprovalRow]:
        """The latest requests, newest first."""

    async def approvals_abandon(
        self, keep: Collection[str], reason: str, at: float | None = None
    ) -> list[ApprovalRow]:
        """Deny (status `restart`) every pending request of an instance not in `keep` (its
        daemon is gone, and the turn with it); the rows so closed."""


class ChannelStates(Protocol):
    """What channels keep across restarts (an IMAP cursor), small text by channel and name."""

    async def channel_state(self, channel: str, name: str) -> str | None: ...

    async def set_channel_state(self, channel: str, name: str, value: str) -> None: ...


class Store(
    Approvals,
    Lifecycle,
    Sessions,
    History,
    UsageLedger,
    Inbox,
    Pairing,
    CronStore,
    Instances,
    Claims,
    Stops,
    Copying,
    Search,
    ChannelStates,
    Protocol,
):
    """Every role at once: what `open_store` returns. Hand a part only the roles it uses."""
