"""The cron job tables (`cron_jobs`, `cron_runs`) as typed rows, and how a job is created.

`CronJobs(store)` is the only code that reads or writes those tables (through
`store.execute`/`store.fetch_all`); SQLite is the source of truth, shared by the daemon's
scheduler and `perch cron` (which works whether the daemon runs or not). `create_job` checks
a `CronRequest` and stores it with its first run computed; `job_view` formats a job for
people and the model.

`deliver_to` holds an encoded chat (`bot.routing.encode_chat`), `owner`, `last`, `none`, or a
typed address such as `<channel>:12345` (resolved when the job runs, when the channel's
account id is known). `cron_runs.status` is one of ok (ran, nothing to send), delivered,
error, skipped (busy, stopped) or missed (a one-shot more than the grace period late).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from agents.tools.cron import CronJobView, CronRequest, SessionMode
from bot.cron_schedule import Schedule, format_time, load_schedule, parse_schedule
from bot.delivery import describe_chat
from bot.routing import decode_chat, parse_target
from bot.store import Store
from channels import registry

log = logging.getLogger(__name__)

RunStatus = Literal["ok", "delivered", "error", "skipped", "missed"]
DELIVERY_WORDS = ("owner", "last", "none")
MAX_JOBS = 100
POLL_EVERY = 30.0  # how often a running daemon looks for jobs changed by another process

_COLUMNS = (
    "id, name, schedule_kind, schedule, tz, message, session_mode, deliver_to, enabled, "
    "created_at, created_by, next_run_at, last_run_at, last_status, last_error, failures"
)


@dataclass(frozen=True, slots=True)
class CronJob:
    id: str
    name: str
    schedule: Schedule
    message: str
    session_mode: SessionMode
    deliver_to: str
    enabled: bool
    created_at: float
    created_by: str = ""
    next_run_at: float | None = None
    last_run_at: float | None = None
    last_status: str = ""
    last_error: str = ""
    failures: int = 0

    @property
    def label(self) -> str:
        return f"{self.id} '{self.name}'" if self.name else self.id


@dataclass(frozen=True, slots=True)
class CronRun:
    job_id: str
    started_at: float
    finished_at: float
    status: RunStatus
    detail: str = ""


def _job(row: tuple[Any, ...]) -> CronJob:
    mode: SessionMode = "chat" if row[6] == "chat" else "isolated"
    return CronJob(
        id=row[0],
        name=row[1],
        schedule=load_schedule(row[2], row[3], row[4]),
        message=row[5],
        session_mode=mode,
        deliver_to=row[7],
        enabled=bool(row[8]),
        created_at=row[9],
        created_by=row[10],
        next_run_at=row[11],
        last_run_at=row[12],
        last_status=row[13],
        last_error=row[14],
        failures=row[15],
    )


class CronJobs:
    """Typed access to the job tables of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def insert(self, job: CronJob) -> None:
        s = job.schedule
        await self.store.execute(
            f"INSERT INTO cron_jobs ({_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.id,
                job.name,
                s.kind,
                s.expr,
                s.tz,
                job.message,
                job.session_mode,
                job.deliver_to,
                int(job.enabled),
                job.created_at,
                job.created_by,
                job.next_run_at,
                job.last_run_at,
                job.last_status,
                job.last_error,
                job.failures,
            ),
        )

    async def get(self, job_id: str) -> CronJob | None:
        rows = await self.store.fetch_all(
            f"SELECT {_COLUMNS} FROM cron_jobs WHERE id = ?", (job_id,)
        )
        for row in rows:
            try:
                return _job(row)
            except ValueError as exc:
                log.warning("cron job %s is unreadable and ignored: %s", job_id, exc)
        return None

    async def all(self) -> list[CronJob]:
        """Every readable job, oldest first (an unreadable row is logged and skipped)."""
        rows = await self.store.fetch_all(
            f"SELECT {_COLUMNS} FROM cron_jobs ORDER BY created_at, id"
        )
        jobs: list[CronJob] = []
        for row in rows:
            try:
                jobs.append(_job(row))
            except ValueError as exc:
                log.warning(
                    "cron job %s is unreadable and ignored: %s; remove it with perch cron rm %s",
                    row[0],
                    exc,
                    row[0],
                )
        return jobs

    async def count_enabled(self) -> int:
        rows = await self.store.fetch_all("SELECT count(*) FROM cron_jobs WHERE enabled = 1")
        return int(rows[0][0])

    async def remove(self, job_id: str) -> bool:
        removed, _ = await self.store.execute_all(
            [
                ("DELETE FROM cron_jobs WHERE id = ?", (job_id,)),
                ("DELETE FROM cron_runs WHERE job_id = ?", (job_id,)),
            ]
        )
        return removed > 0

    async def update(
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
        """Set a job's state; fields left None keep their value. With `run`, the run is
        recorded in the same transaction. False if the job is gone."""
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if run is not None:
            statements.append(_record(run))
        statements.append(
            (
                "UPDATE cron_jobs SET enabled = ?, next_run_at = ?, failures = ?, "
                "last_run_at = COALESCE(?, last_run_at), "
                "last_status = COALESCE(?, last_status), "
                "last_error = COALESCE(?, last_error) WHERE id = ?",
                (int(enabled), next_run_at, failures, last_run_at, last_status, last_error, job_id),
            )
        )
        counts = await self.store.execute_all(statements)
        return counts[-1] > 0

    async def record_run(self, run: CronRun) -> None:
        await self.store.execute(*_record(run))

    async def runs(self, job_id: str, limit: int = 20) -> list[CronRun]:
        """The job's most recent runs, newest first."""
        rows = await self.store.fetch_all(
            "SELECT job_id, started_at, finished_at, status, detail FROM cron_runs "
            "WHERE job_id = ? ORDER BY id DESC LIMIT ?",
            (job_id, limit),
        )
        return [CronRun(r[0], r[1], r[2] or r[1], r[3], r[4]) for r in rows]

    async def data_version(self) -> int:
        """Changes when another connection (e.g. `perch cron add`) commits to the database."""
        rows = await self.store.fetch_all("PRAGMA data_version")
        return int(rows[0][0])


def _record(run: CronRun) -> tuple[str, tuple[Any, ...]]:
    return (
        "INSERT INTO cron_runs (job_id, started_at, finished_at, status, detail) "
        "VALUES (?, ?, ?, ?, ?)",
        (run.job_id, run.started_at, run.finished_at, run.status, run.detail),
    )


def check_deliver_to(text: str) -> str:
    """A stored delivery address, or ValueError naming the accepted forms."""
    text = text.strip()
    if text in DELIVERY_WORDS:
        return text
    if text.startswith("{"):
        if decode_chat(text) is None:
            raise ValueError(f"deliver_to {text!r} is not a chat address")
        return text
    parse_target(text, {name: "" for name in registry.names()})
    return text


def describe_target(text: str) -> str:
    if text == "owner":
        return "the owner"
    if text == "last":
        return "the last active chat"
    if text == "none":
        return "nobody"
    chat = decode_chat(text)
    return describe_chat(chat) if chat is not None else text


FAST_MIN_EVERY = 1.0  # the floor for a job that says allow_fast


async def create_job(
    jobs: CronJobs,
    request: CronRequest,
    *,
    default_tz: str,
    now: float,
    min_every: float = 1.0,
    max_jobs: int = MAX_JOBS,
) -> CronJob:
    """Check `request` and store it as a job; ValueError says what to change."""
    message = request.message.strip()
    if not message:
        raise ValueError("the message is empty: say what should happen when the job fires")
    if request.allow_fast:
        min_every = min(min_every, FAST_MIN_EVERY)
    schedule = parse_schedule(
        request.kind, request.expr, request.tz or default_tz, now=now, min_every=min_every
    )
    deliver_to = check_deliver_to(request.deliver_to)
    if request.session == "chat" and deliver_to == "none":
        raise ValueError(
            "a chat-session job runs in the delivery chat, so deliver_to cannot be none"
        )
    if await jobs.count_enabled() >= max_jobs:
        raise ValueError(
            f"there are already {max_jobs} active cron jobs; remove some before adding more"
        )
    job = CronJob(
        id=uuid.uuid4().hex[:8],
        name=request.name.strip(),
        schedule=schedule,
        message=message,
        session_mode=request.session,
        deliver_to=deliver_to,
        enabled=True,
        created_at=now,
        created_by=request.created_by,
        next_run_at=schedule.next_after(now, anchor=now),
    )
    await jobs.insert(job)
    return job


def job_view(job: CronJob) -> CronJobView:
    if job.enabled and job.next_run_at is not None:
        next_run = format_time(job.next_run_at, job.schedule.tz)
    else:
        next_run = ""
    return CronJobView(
        id=job.id,
        name=job.name,
        schedule=job.schedule.describe(),
        message=job.message,
        session=job.session_mode,
        deliver_to=describe_target(job.deliver_to),
        enabled=job.enabled,
        next_run=next_run,
        last_status=job.last_status,
        last_error=job.last_error,
    )
