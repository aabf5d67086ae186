"""The scheduler: APScheduler's clock driving heartbeats and cron jobs stored in SQLite.

Once `start()` runs, `Scheduler` keeps an `AsyncIOScheduler` with one date timer per enabled
job (at its `next_run_at`), the heartbeat interval, and a cheap poll that notices jobs added
or removed by `perch cron` in another process (`PRAGMA data_version`, every `poll_every`
seconds); jobs the `cron` tool adds through the `JobBook` (`bot/cron/book.py`) are planned
as soon as the book says they changed. APScheduler only tells time; the job rows are the
truth, re-read before each run.

A run (`bot/cron/run.py`): isolated jobs get a fresh `agent:<id>:cron:<jobId>` session (minimal prompt) and the
result goes to `deliver_to` through `bot.kernel.delivery.send_reply`; chat jobs are injected into the delivery chat's session
(queued behind a running turn) and answer there. NO_REPLY posts nothing. Outcomes go to
`cron_runs`. Transient failures (model errors, a busy session, an unreachable target or
channel) retry after `retry_delays` (60 s, 120 s, 300 s), then the job moves on: a recurring
job to its next time, a one-shot is disabled. A one-shot is disabled after it ran.

Restarts: on start every enabled job is planned from its stored `next_run_at`. An overdue
one-shot runs at once if its time is at most `grace` (24 h) ago, else it is marked missed
(`perch cron list` shows it). An overdue recurring job runs once however many times it was
missed (coalesced), then continues from now. A run cut short by shutdown leaves the job due,
so the next start runs it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.cluster import once
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.heartbeat import Heartbeat
from bot.cron.jobs import POLL_EVERY, CronJob, CronJobs, CronRun
from bot.cron.run import JobRunner, RunOutcome
from bot.cron.schedule import format_time
from bot.kernel.ports import Outbox, SystemTurns
from bot.observe.telemetry import OFF, Telemetry
from bot.store.roles import Claims, CronStore, Sessions

log = logging.getLogger(__name__)

_EPOCH = datetime.fromtimestamp(0, UTC)

RETRY_DELAYS = (60.0, 120.0, 300.0)
MISSED_GRACE = 24 * 3600.0


class SchedulerStore(CronStore, Claims, Sessions, Protocol):
    """The job rows, the claims that make a slot fire once, the sessions jobs reset."""


class Scheduler:
    """Heartbeat and cron jobs for one daemon."""

    def __init__(
        self,
        config: Config,
        store: SchedulerStore,
        turns: SystemTurns,
        outbox: Outbox,
        book: JobBook,
        heartbeat: Heartbeat | None = None,
        *,
        telemetry: Telemetry = OFF,  # each run's outcome is counted
        budget_gate: Callable[[], Awaitable[str]] | None = None,
        clock: Callable[[], float] = time.time,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        grace: float = MISSED_GRACE,
        poll_every: float = POLL_EVERY,
        more_heartbeats: Sequence[Heartbeat] = (),  # the other agents' (`agents:`)
    ) -> None:
        self.config = config
        self.store = store
        self.telemetry = telemetry
        self.book = book
        self.heartbeat = heartbeat
        # Every agent's heartbeat, main's first: each reads its own workspace's HEARTBEAT.md.
        self.heartbeats: tuple[Heartbeat, ...] = (
            *((heartbeat,) if heartbeat is not None else ()),
            *more_heartbeats,
        )
        self.jobs = CronJobs(store)
        self.clock = clock
        self.retry_delays = tuple(retry_delays)
        self.grace = grace
        self.poll_every = poll_every
        self._aps: AsyncIOScheduler | None = None
        self._planned: dict[str, float] = {}  # job id -> the next_run_at its timer serves
        self._running: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._data_version = 0
        self._stopping = False
        self._sync_lock = asyncio.Lock()
        # Returns why nothing may be spent now (bot/kernel/budget.py), or "": runs are skipped then.
        self.budget_gate = budget_gate
        self._watching: asyncio.Task[None] | None = None
        self.runs = JobRunner(config, store, turns, outbox, lambda: self._stopping, book.people)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the jobs (handling those missed while down), start the timers."""
        if logging.getLogger("apscheduler").level == logging.NOTSET:
            logging.getLogger("apscheduler").setLevel(logging.WARNING)
        self._aps = AsyncIOScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "misfire_grace_time": None, "max_instances": 1},
        )
        self._aps.start()
        self._data_version = await self.jobs.data_version()
        await self.sync()
        every = self.config.heartbeat.every
        if every > 0:
            self._aps.add_job(
                self._spawner(self._heartbeat_tick),
                # On a grid from the epoch (`30m`: :00 and :30 UTC): a restart keeps the
                # times, and instances sharing a store tick together, one claim per tick.
                IntervalTrigger(seconds=max(every, 1.0), start_date=_EPOCH, timezone=UTC),
                id="heartbeat",
            )
            hours = self.config.heartbeat.active_hours
            within = f" within {hours}" if hours else ""
            log.info("heartbeat every %gs%s, next %s", every, within, self.next_heartbeat() or "?")
        self._aps.add_job(
            self._spawner(self.poll),
            IntervalTrigger(seconds=max(self.poll_every, 0.1), timezone=UTC),
            id="cron-poll",
        )
        self._watching = asyncio.create_task(self._plan_book_changes(), name="cron-book")

    async def _plan_book_changes(self) -> None:
        while True:
            await self.book.changed()
            try:
                await self.sync()
            except Exception:
                log.exception("planning the cron jobs failed; the next poll tries again")

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop the timers and wait (up to `timeout`) for runs in progress to record."""
        self._stopping = True
        if self._watching is not None:
            self._watching.cancel()
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None
        tasks = [t for t in self._tasks if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1)

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait until no heartbeat or job run is in progress; TimeoutError after `timeout`."""
        async with asyncio.timeout(timeout):
            while tasks := [t for t in self._tasks if not t.done()]:
                await asyncio.wait(tasks)

    def status(self) -> dict[str, str]:
        """`next_heartbeat` / `next_cron` for `perch status` (absent when nothing is due)."""
        out: dict[str, str] = {}
        if (beat := self.next_heartbeat()) is not None:
            out["next_heartbeat"] = beat
        if (cron := self.next_cron()) is not None:
            out["next_cron"] = cron
        return out

    def next_heartbeat(self) -> str | None:
        job = self._aps.get_job("heartbeat") if self._aps is not None else None
        when = getattr(job, "next_run_time", None) if job is not None else None
        if when is None:
            return None
        tz = self.config.heartbeat.timezone or self.config.agent.timezone
        return format_time(when.timestamp(), tz)

    def next_cron(self) -> str | None:
        if not self._planned:
            return None
        job_id, due = min(self._planned.items(), key=lambda item: item[1])
        when = format_time(max(due, self.clock()), self.config.agent.timezone)
        return f"{when} (job {job_id})"

    # -- loading and planning --------------------------------------------------------------

    async def poll(self) -> bool:
        """Reload the jobs if another process changed the database; True if it did."""
        try:
            version = await self.jobs.data_version()
            if version == self._data_version:
                return False
            self._data_version = version
            await self.sync()
            return True
        except Exception:
            log.exception("checking the cron table for changes failed; trying again later")
            return False

    async def sync(self) -> None:
        """Make the timers match the table: new jobs planned, removed or disabled ones
        dropped, changed times re-planned, overdue ones handled (grace, coalescing)."""
        async with self._sync_lock:
            jobs = {job.id: job for job in await self.jobs.all() if job.enabled}
            for job_id in list(self._planned):
                if job_id not in jobs:
                    self._unplan(job_id)
            for job in jobs.values():
                if job.id in self._running or self._planned.get(job.id) == job.next_run_at:
                    continue
                await self._plan(job)

    async def _plan(self, job: CronJob) -> None:
        now = self.clock()
        due = job.next_run_at
        if due is None:
            due = job.schedule.next_after(now, anchor=job.created_at)
            if due is None:
                await self.jobs.update(job.id, enabled=False, next_run_at=None, failures=0)
                return
            await self.jobs.update(job.id, enabled=True, next_run_at=due, failures=job.failures)
        if job.schedule.one_shot and now - job.schedule.at_time > self.grace and due <= now:
            hours = (now - job.schedule.at_time) / 3600
            detail = (
                f"due {format_time(job.schedule.at_time, job.schedule.tz)}, {hours:.0f} h "
                f"ago, while Perch was not running; more than {self.grace / 3600:g} h late, "
                "so it was not run"
            )
            log.warning("cron job %s missed: %s", job.label, detail)
            self.telemetry.cron_run("missed")
            await self.jobs.record_run(CronRun(job.id, now, now, "missed", detail))
            await self.jobs.update(
                job.id,
                enabled=False,
                next_run_at=None,
                failures=0,
                last_status="missed",
                last_error=detail,
            )
            return
        if self._aps is None:
            return  # not started yet (e.g. the tool used before start): start() plans it
        self._planned[job.id] = due
        self._timer(job.id, max(due, now))

    def _timer(self, job_id: str, at: float) -> None:
        """(Re)set the job's one APScheduler timer to `at`."""
        assert self._aps is not None
        self._aps.add_job(
            self._spawner(self._run_job),
            DateTrigger(run_date=datetime.fromtimestamp(at, UTC), timezone=UTC),
            args=[job_id],
            id=f"cron:{job_id}",
            replace_existing=True,
        )

    def _unplan(self, job_id: str) -> None:
        self._planned.pop(job_id, None)
        if self._aps is not None and self._aps.get_job(f"cron:{job_id}") is not None:
            self._aps.remove_job(f"cron:{job_id}")

    # -- running ---------------------------------------------------------------------------

    def _spawner(
        self, func: Callable[..., Coroutine[Any, Any, Any]]
    ) -> Callable[..., Awaitable[None]]:
        """An APScheduler job function that starts `func` as a tracked task and returns,
        so APScheduler's own instance limits never skip a run."""

        async def spawn(*args: Any) -> None:
            if self._stopping:
                return
            task = asyncio.create_task(func(*args))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return spawn

    async def _heartbeat_tick(self) -> None:
        if self.heartbeat is None:
            return
        if self.budget_gate is not None and await self.budget_gate():
            return
        every = max(self.config.heartbeat.every, 1.0)
        slot = round(time.time() / every) * every  # the grid point this tick fired at
        if not await once.take(self.store, "heartbeat", slot):
            return
        try:
            for beat in self.heartbeats:  # one agent's beat never stops the next (tick: no raise)
                await beat.tick()
        finally:
            await once.finish(self.store, "heartbeat", slot)

    async def run_now(self, job_id: str) -> None:
        """Run a job at once, as if it were due (its timer, if any, is dropped)."""
        await self._run_job(job_id, forced=True)

    async def _run_job(self, job_id: str, *, forced: bool = False) -> None:
        if job_id in self._running:
            return
        self._running.add(job_id)
        self._unplan(job_id)
        try:
            job = await self.jobs.get(job_id)
            if job is None or not job.enabled or self._stopping:
                return
            if not forced and once.not_yet(self.store, job.next_run_at, self.clock()):
                await self._plan(job)  # another instance ran it meanwhile: its next time
                return
            slot = job.next_run_at if job.next_run_at is not None else self.clock()
            if not await once.take(self.store, f"cron:{job.id}", slot):
                self._check_again(job)  # another instance runs it; if that one dies, we do
                return
            done = False
            try:
                done = await self._claimed_run(job)
            finally:  # a run cut short by shutdown leaves the slot to the next instance
                await once.finish(self.store, f"cron:{job.id}", slot, done=done)
        finally:
            self._running.discard(job_id)

    def _check_again(self, job: CronJob) -> None:
        if self._aps is None or job.next_run_at is None:
            return
        self._planned[job.id] = job.next_run_at
        self._timer(job.id, self.clock() + self.store.lease)

    async def _claimed_run(self, job: CronJob) -> bool:
        """Run a job this instance claimed; False if shutdown cut it short."""
        started = self.clock()
        missed = 0
        if not job.schedule.one_shot and job.next_run_at is not None:
            missed = job.schedule.count_between(job.next_run_at, started, anchor=job.created_at)
        try:
            outcome = await self.runs.run(job, self.budget_gate)
        except Exception as exc:
            log.exception("cron job %s failed", job.label)
            outcome = RunOutcome("error", f"{type(exc).__name__}: {exc}", transient=True)
        if outcome.shutdown:
            log.info("cron job %s interrupted by shutdown; it runs again at start", job.label)
            return False
        if missed > 1 and not job.failures:
            outcome = RunOutcome(
                outcome.status,
                f"{outcome.detail}; ran once for {missed} missed times".lstrip("; "),
                outcome.transient,
            )
        await self._settle(job, outcome, started)
        return True

    async def _settle(self, job: CronJob, outcome: RunOutcome, started: float) -> None:
        now = self.clock()
        detail = outcome.detail
        attempt = job.failures + 1
        retry_at: float | None = None
        if outcome.wait and job.schedule.one_shot:  # it runs once the budget allows
            retry_at = now + outcome.wait
            detail += f"; a one-shot job waits: it looks again in {outcome.wait / 60:g} min"
        elif outcome.transient and attempt <= len(self.retry_delays):
            delay = self.retry_delays[attempt - 1]
            retry_at = now + delay
            detail += f"; retry {attempt} of {len(self.retry_delays)} in {delay:g} s"
        elif outcome.transient:
            detail += f"; gave up after {len(self.retry_delays)} retries"
        log_level = logging.WARNING if outcome.status in ("error", "skipped") else logging.INFO
        log.log(log_level, "cron job %s: %s%s", job.label, outcome.status, f" ({detail})")
        self.telemetry.cron_run(outcome.status)
        error = detail if outcome.status in ("error", "skipped") else ""
        failures = 0
        if retry_at is not None and not outcome.wait:
            failures = attempt
        elif not job.schedule.one_shot:
            retry_at = job.schedule.next_after(now, anchor=job.created_at)
        still_there = await self.jobs.update(
            job.id,
            enabled=retry_at is not None,
            next_run_at=retry_at,
            failures=failures,
            last_run_at=now,
            last_status=outcome.status,
            last_error=error,
            run=CronRun(job.id, started, now, outcome.status, detail),
        )
        if still_there and retry_at is not None and not self._stopping:
            fresh = await self.jobs.get(job.id)
            if fresh is not None and fresh.enabled:
                await self._plan(fresh)
