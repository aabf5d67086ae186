"""Cron jobs per agent: whose a job is, and the `cron` tool's view of the book.

A job belongs to the agent that made it, read from its `created_by` (no schema change): a
session key (`agent:<id>:...`, the `cron` tool's) names its agent; `cli@<id>` is
`perch cron add --agent <id>`; anything else (`cli`, older rows) is the main agent's.
`AgentJobBook` is one agent's `CronService`: it lists and removes only that agent's jobs,
so no agent sees or cancels another's; the scheduler runs each job as its agent
(`bot/cron/run.py`).
"""

from __future__ import annotations

from agents.tools.cron import CronJobView, CronRequest
from bot.cron.book import JobBook

CLI = "cli"


def agent_of_creator(created_by: str, main: str) -> str:
    """The agent a job with this `created_by` belongs to."""
    if created_by.startswith("agent:"):
        found = created_by.split(":", 2)[1]
        return found or main
    if created_by.startswith(CLI + "@"):
        return created_by.removeprefix(CLI + "@") or main
    return main


def cli_creator(agent: str, main: str) -> str:
    """`created_by` of a job `perch cron add --agent <agent>` makes."""
    return CLI if not agent or agent == main else f"{CLI}@{agent}"


class AgentJobBook:
    """The `cron` tool's service for one agent (see the module's docstring)."""

    def __init__(self, book: JobBook, agent: str, main: str) -> None:
        self.book = book
        self.agent = agent
        self.main = main

    def _mine(self, created_by: str) -> bool:
        return agent_of_creator(created_by, self.main) == self.agent

    async def add_job(self, request: CronRequest) -> CronJobView:
        return await self.book.add_job(request)

    async def list_jobs(self, asker: str = "") -> list[CronJobView]:
        """The jobs of this agent that `asker` may see (the person rule, `JobBook`)."""
        visible = await self.book.list_jobs(asker)
        jobs = {job.id: job for job in await self.book.jobs.all()}
        return [v for v in visible if v.id in jobs and self._mine(jobs[v.id].created_by)]

    async def remove_job(self, job_id: str, asker: str = "") -> bool:
        jobs = {job.id: job for job in await self.book.jobs.all()}
        job = jobs.get(job_id.strip())
        if job is None or not self._mine(job.created_by):
            return False
        return await self.book.remove_job(job_id, asker)
