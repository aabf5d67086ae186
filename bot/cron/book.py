"""The cron tool's `CronService`: jobs added, listed and removed in the store.

`JobBook` checks a request (schedule, timezone, the shortest interval the model may ask
for), writes the job and says so through `changed()`, which the scheduler waits on to plan
it; it never calls the scheduler, so the tool can exist before the scheduler does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from agents.tools.cron import CronJobView, CronRequest
from bot.config.schema import Config
from bot.cron.jobs import CronJobs, create_job, job_view
from bot.store.roles import CronStore

log = logging.getLogger(__name__)

MIN_TOOL_EVERY = 60.0  # the model may not schedule anything more often than this


class JobBook:
    def __init__(
        self,
        config: Config,
        store: CronStore,
        *,
        clock: Callable[[], float] = time.time,
        min_every: float = MIN_TOOL_EVERY,
    ) -> None:
        self.config = config
        self.jobs = CronJobs(store)
        self.clock = clock
        self.min_every = min_every
        self._changed = asyncio.Event()

    async def add_job(self, request: CronRequest) -> CronJobView:
        job = await create_job(
            self.jobs,
            request,
            default_tz=self.config.agent.timezone,
            now=self.clock(),
            min_every=self.min_every,
        )
        log.info("cron job %s added: %s", job.label, job.schedule.describe())
        self._changed.set()
        return job_view(job)

    async def list_jobs(self) -> list[CronJobView]:
        return [job_view(job) for job in await self.jobs.all()]

    async def remove_job(self, job_id: str) -> bool:
        removed = await self.jobs.remove(job_id.strip())
        if removed:
            log.info("cron job %s removed", job_id)
            self._changed.set()
        return removed

    async def changed(self) -> None:
        """Wait until a job was added or removed here since the last call."""
        await self._changed.wait()
        self._changed.clear()
