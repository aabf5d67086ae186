"""The cron tool's `CronService`: jobs added, listed and removed in the store.

`JobBook` checks a request (schedule, timezone, the shortest interval the model may ask
for), writes the job and says so through `changed()`, which the scheduler waits on to plan
it; it never calls the scheduler, so the tool can exist before the scheduler does.

A job acts for the person whose turn created it (`bot/kernel/people.py`): only the owner (or the
operator's CLI) may deliver to `owner`/`last` or into another chat; anyone else delivers to
their own chat or nowhere, and lists and removes only their own jobs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from agents.tools.cron import CronJobView, CronRequest
from bot.config.schema import Config
from bot.cron.jobs import CronJob, CronJobs, create_job, job_view
from bot.kernel.people import People, Person, owners_of
from bot.kernel.routing import decode_chat
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
        self.people = People(owners_of(config.channels.all()), self.jobs.creator)
        self.clock = clock
        self.min_every = min_every
        self._changed = asyncio.Event()

    async def add_job(self, request: CronRequest) -> CronJobView:
        _check_reach(await self.people.creator(request.created_by), request)
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

    async def list_jobs(self, asker: str = "") -> list[CronJobView]:
        return [job_view(job) for job in await self._visible(asker)]

    async def remove_job(self, job_id: str, asker: str = "") -> bool:
        job_id = job_id.strip()
        if job_id not in {job.id for job in await self._visible(asker)}:
            return False
        removed = await self.jobs.remove(job_id)
        if removed:
            log.info("cron job %s removed", job_id)
            self._changed.set()
        return removed

    async def changed(self) -> None:
        """Wait until a job was added or removed here since the last call."""
        await self._changed.wait()
        self._changed.clear()

    async def _visible(self, asker: str) -> list[CronJob]:
        """The jobs `asker` (a session key; "" = the operator) may list and remove."""
        person = await self.people.creator(asker)
        jobs = await self.jobs.all()
        if person.is_owner:
            return jobs
        return [job for job in jobs if await self.people.creator(job.created_by) == person]


def _check_reach(person: Person, request: CronRequest) -> None:
    """ValueError (for the model) when `person` may not deliver where `request` says."""
    where = request.deliver_to
    if person.is_owner or where == "none":
        return
    chat = decode_chat(where)
    if chat is None or not person.may_reach(chat):
        raise ValueError(
            f"only the owner may schedule into another chat (deliver_to {where!r} was "
            "asked from someone else's chat); use deliver_to here or none"
        )
