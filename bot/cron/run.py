"""One cron job's run: the wake-up text, the session it runs in, and how it went.

A chat job is injected into its delivery chat's session (queued behind a running turn)
and answers there; an isolated job gets a fresh `agent:<id>:cron:<jobId>` session with the
minimal prompt, and its reply goes to `deliver_to` through `bot.kernel.delivery.send_reply`.
NO_REPLY posts nothing. A job acts for the person whose turn created it (`bot/kernel/people.py`):
a job whose delivery chat that person may not reach (made before the rule, or `last`
turned elsewhere) is refused when it runs, never run in someone else's chat. The `RunOutcome`
tells the scheduler whether to retry
(`transient`) or leave the job due because the daemon is stopping (`shutdown`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.config.schema import Config
from bot.cron.heartbeat import TargetError, resolve_target
from bot.cron.jobs import CronJob, RunStatus, describe_chat
from bot.fleet.cron_scope import agent_of_creator
from bot.kernel.delivery import DeliveryError, clean_reply
from bot.kernel.people import People
from bot.kernel.ports import Outbox, SystemTurns
from bot.kernel.sessions import SessionKey
from bot.store.roles import Sessions
from channels.base import ChatRef

BudgetGate = Callable[[], Awaitable[str]]

WAKE_UP = """\
[Scheduled job {label}: {schedule}]
{message}

{delivery}"""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    status: RunStatus
    detail: str = ""
    transient: bool = False  # worth retrying
    shutdown: bool = False  # cut short by shutdown: leave the job due
    wait: float = 0.0  # > 0: a one-shot job looks again this many seconds later (no retry)


BUDGET_WAIT = 600.0  # a one-shot job due while the budget pauses runs looks again this often
SHUTDOWN = RunOutcome("skipped", "the daemon is stopping", shutdown=True)


class JobRunner:
    """Runs cron jobs as system turns (`turns`, the hub through its port) and delivers what
    they answer through `outbox`; `stopping()` says the scheduler is shutting down."""

    def __init__(
        self,
        config: Config,
        store: Sessions,
        turns: SystemTurns,
        outbox: Outbox,
        stopping: Callable[[], bool],
        people: People,
    ) -> None:
        self.config = config
        self.store = store
        self.turns = turns
        self.outbox = outbox
        self.stopping = stopping
        self.people = people

    async def run(self, job: CronJob, budget_gate: BudgetGate | None = None) -> RunOutcome:
        """Run `job` once and say how it went. `budget_gate` returns why nothing may be
        spent now (bot/kernel/budget.py), or "": the run is skipped then."""
        turns = self.turns
        if not turns.accepting:
            return SHUTDOWN
        if budget_gate is not None and (why := await budget_gate()):
            return RunOutcome("skipped", f"daily budget: {why}", wait=BUDGET_WAIT)
        try:
            chat = await resolve_target(
                job.deliver_to, config=self.config, channels=self.outbox.channels, store=self.store
            )
        except TargetError as exc:
            return RunOutcome("error", f"cannot deliver: {exc}", transient=True)
        person = await self.people.creator(job.created_by)
        if chat is not None and not person.may_reach(chat):
            return RunOutcome(
                "error",
                f"refused: the job was made by {person.describe()}, who may not reach "
                f"{describe_chat(chat)}; only the owner schedules into other chats",
            )
        text = WAKE_UP.format(
            label=job.label,
            schedule=job.schedule.describe(),
            message=job.message,
            delivery=(
                "Your reply is sent to the user as the result of this job. If there is "
                "nothing worth sending, reply exactly NO_REPLY."
                if chat is not None
                else "Your reply is not sent to anyone; do the work and reply briefly."
            ),
        )
        if job.session_mode == "chat":
            if chat is None:
                return RunOutcome("error", "a chat-session job needs a chat; deliver_to is none")
            return await self._run_in_chat(chat, text, self._agent(job))
        return await self._run_isolated(job, chat, text)

    def _agent(self, job: CronJob) -> str:
        """The agent the job runs as: the one that made it (`bot/fleet/cron_scope.py`)."""
        return agent_of_creator(job.created_by, self.config.agent.id)

    async def _run_in_chat(self, chat: ChatRef, text: str, agent: str) -> RunOutcome:
        turns = self.turns
        key = SessionKey.for_chat(agent, chat)
        busy = turns.is_busy(key)
        outcome = await turns.run_system_turn(key, text, chat=chat, when_busy="queue", mode="full")
        if outcome is None:
            if not turns.accepting or self.stopping():
                return SHUTDOWN
            if busy:
                return RunOutcome("ok", f"queued behind a running turn in {describe_chat(chat)}")
            return RunOutcome("error", "the turn failed; see the log", transient=True)
        result = outcome.result
        if result is None:
            return RunOutcome("error", f"channel {chat.channel} is not running", transient=True)
        if result.status == "error":
            return RunOutcome("error", f"the model call failed: {result.error}", transient=True)
        if result.status == "cancelled":
            if self.stopping() or not turns.accepting:
                return SHUTDOWN
            return RunOutcome("skipped", "stopped with /stop")
        if outcome.delivered:
            return RunOutcome("delivered", f"to {describe_chat(chat)}")
        return RunOutcome("ok", "NO_REPLY: nothing sent")

    async def _run_isolated(self, job: CronJob, chat: ChatRef | None, text: str) -> RunOutcome:
        turns = self.turns
        key = SessionKey.cron(self._agent(job), job.id)
        if turns.is_busy(key):
            return RunOutcome("skipped", "the previous run is still going", transient=True)
        await self.store.reset_session(str(key))  # every run starts fresh
        outcome = await turns.run_system_turn(key, text, when_busy="skip", mode="minimal")
        if outcome is None:
            if not turns.accepting or self.stopping():
                return SHUTDOWN
            if turns.is_busy(key):
                return RunOutcome("skipped", "the session was busy", transient=True)
            return RunOutcome("error", "the turn failed; see the log", transient=True)
        result = outcome.result
        if result is None:
            return RunOutcome("error", "the turn did not run", transient=True)
        if result.status == "error":
            return RunOutcome("error", f"the model call failed: {result.error}", transient=True)
        if result.status == "cancelled":
            return (
                SHUTDOWN
                if self.stopping() or not turns.accepting
                else RunOutcome("skipped", "cancelled")
            )
        if chat is None:
            if not clean_reply(result.text):
                return RunOutcome("ok", "NO_REPLY: nothing sent")
            return RunOutcome("ok", "deliver_to none: the result stays in the job's session")
        try:
            sent = await self.outbox.send(chat, result.text)  # counted
        except DeliveryError as exc:
            return RunOutcome("error", str(exc), transient=True)
        if not sent:
            return RunOutcome("ok", "NO_REPLY: nothing sent")
        return RunOutcome("delivered", f"to {describe_chat(chat)}")
