"""The cron job tables (`cron_jobs`, `cron_runs`) as typed rows, and how a job is created.

`CronJobs(store)` is the typed face of those tables (the SQL lives in the store's backend,
`cron_*` methods); the store is the source of truth, shared by the daemon's
scheduler and `perch cron` (which works whether the daemon runs or not). `create_job` checks
a `CronRequest` and stores it with its first run computed; `job_view` formats a job for
people and the model.

`deliver_to` holds an encoded chat (`bot.kernel.routing.encode_chat`), `owner`, `last`, `none`, or a
typed address such as `<channel>:12345` (resolved when the job runs, when the channel's
account id is known). `cron_runs.status` is one of ok (ran, nothing to send), delivered,
error, skipped (busy, stopped) or missed (a one-shot more than the grace period late).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from agents.tools.cron import CronJobView, CronRequest, SessionMode
from bot.cluster.instances import beat_every
from bot.cron.schedule import Schedule, format_time, load_schedule, parse_schedule
from bot.kernel.delivery import describe_chat
from bot.kernel.routing import decode_chat, parse_target
from bot.store.roles import CronStore, Lifecycle
from bot.store.rows import CronJobRow, CronRun
from bot.store.rows import RunStatus as RunStatus
from channels import registry

log = logging.getLogger(__name__)

DELIVERY_WORDS = ("owner", "last", "none")
MAX_JOBS = 100
POLL_EVERY = 30.0  # how often a running daemon looks for jobs changed by another process


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


def _job(row: CronJobRow) -> CronJob:
    mode: SessionMode = "chat" if row.session_mode == "chat" else "isolated"
    return CronJob(
        id=row.id,
        name=row.name,
        schedule=load_schedule(row.schedule_kind, row.schedule, row.tz),
        message=row.message,
        session_mode=mode,
        deliver_to=row.deliver_to,
        enabled=row.enabled,
        created_at=row.created_at,
        created_by=row.created_by,
        next_run_at=row.next_run_at,
        last_run_at=row.last_run_at,
        last_status=row.last_status,
        last_error=row.last_error,
        failures=row.failures,
    )


class CronJobs:
    """Typed access to the job tables of one store."""

    def __init__(self, store: CronStore) -> None:
        self.store = store

    async def insert(self, job: CronJob) -> None:
        s = job.schedule
        await self.store.cron_insert(
            CronJobRow(
                id=job.id,
                name=job.name,
                schedule_kind=s.kind,
                schedule=s.expr,
                tz=s.tz,
                message=job.message,
                session_mode=job.session_mode,
                deliver_to=job.deliver_to,
                enabled=job.enabled,
                created_at=job.created_at,
                created_by=job.created_by,
                next_run_at=job.next_run_at,
                last_run_at=job.last_run_at,
                last_status=job.last_status,
                last_error=job.last_error,
                failures=job.failures,
            )
        )

    async def get(self, job_id: str) -> CronJob | None:
        row = await self.store.cron_get(job_id)
        if row is None:
            return None
        try:
            return _job(row)
        except ValueError as exc:
            log.warning("cron job %s is unreadable and ignored: %s", job_id, exc)
        return None

    async def creator(self, job_id: str) -> str | None:
        """Who made job `job_id` (a session key; "" = `perch cron add`), None if there is none."""
        row = await self.store.cron_get(job_id)
        return None if row is None else row.created_by

    async def all(self) -> list[CronJob]:
        """Every readable job, oldest first (an unreadable row is logged and skipped)."""
        jobs: list[CronJob] = []
        for row in await self.store.cron_all():
            try:
                jobs.append(_job(row))
            except ValueError as exc:
                log.warning(
                    "cron job %s is unreadable and ignored: %s; remove it with perch cron rm %s",
                    row.id,
                    exc,
                    row.id,
                )
        return jobs

    async def count_enabled(self) -> int:
        return await self.store.cron_count_enabled()

    async def remove(self, job_id: str) -> bool:
        return await self.store.cron_remove(job_id)

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
        return await self.store.cron_update(
            job_id,
            enabled=enabled,
            next_run_at=next_run_at,
            failures=failures,
            last_run_at=last_run_at,
            last_status=last_status,
            last_error=last_error,
            run=run,
        )

    async def record_run(self, run: CronRun) -> None:
        await self.store.cron_record_run(run)

    async def runs(self, job_id: str, limit: int = 20) -> list[CronRun]:
        """The job's most recent runs, newest first."""
        return await self.store.cron_runs(job_id, limit)

    async def data_version(self) -> int:
        """Changes when another connection (e.g. `perch cron add`) commits to the database."""
        return await self.store.cron_changes()


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


def cron_poll_every(store: Lifecycle) -> float:
    """How often the scheduler looks for job changes: every beat when instances share the
    store (a job added on one is planned on all), else the single daemon's slow poll."""
    return beat_every(store.lease) if store.shared else POLL_EVERY
