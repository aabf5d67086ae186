"""The `cron` tool against the real scheduler service and store: validation, add/list/remove."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.tools.base import ToolContext, ToolError
from agents.tools.cron import CronTool
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.jobs import CronJobs
from bot.kernel.routing import decode_chat, encode_chat
from bot.store.open import open_store
from bot.store.roles import Store
from channels.base import ChatRef

CHAT = ChatRef("telegram", "bot", "dm", "u1")
NOW = 1_740_000_000.0  # 2025-02-19 21:20 UTC


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(tmp_path / "perch.db")
    yield s
    await s.close()


@pytest.fixture
def tool(store: Store) -> CronTool:
    config = Config.model_validate(
        {
            "agent": {"timezone": "Europe/Berlin"},
            "channels": {"telegram": {"allow_from": ["u1", "u2"]}},  # u1 is the owner
        }
    )
    return CronTool(JobBook(config, store, clock=lambda: NOW))


def ctx(origin: str | None = encode_chat(CHAT), depth: int = 0, peer: str = "u1") -> ToolContext:
    return ToolContext(
        workspace=Path("."),
        session_key=f"agent:main:telegram:bot:dm:{peer}",
        origin=origin,
        depth=depth,
    )


async def test_add_records_the_asking_chat_as_delivery_and_computes_the_next_run(
    tool: CronTool, store: Store
) -> None:
    args = {
        "action": "add",
        "name": "call Alex",
        "at": "2025-02-20T09:00",
        "message": "Remind the user to call Alex.",
    }
    result = await tool.run(args, ctx())
    assert "Scheduled" in result.content and "2025-02-20 09:00 CET" in result.content
    [job] = await CronJobs(store).all()
    assert decode_chat(job.deliver_to) == CHAT
    assert job.created_by == "agent:main:telegram:bot:dm:u1"
    assert job.schedule.tz == "Europe/Berlin"  # the agent's timezone by default
    assert job.next_run_at == job.schedule.at_time
    assert job.session_mode == "isolated" and job.enabled


async def test_list_and_remove(tool: CronTool) -> None:
    await tool.run({"action": "add", "every": "2h", "message": "Check the build."}, ctx())
    await tool.run(
        {"action": "add", "cron": "0 9 * * 1-5", "tz": "UTC", "message": "Standup notes."},
        ctx(),
    )
    listing = (await tool.run({"action": "list"}, ctx())).content
    assert "every 2h" in listing and "cron '0 9 * * 1-5' (UTC)" in listing
    assert "telegram dm u1" in listing
    job_id = listing.split("\n")[0].removeprefix("- ").split(":")[0].split(" ")[0]
    assert (await tool.run({"action": "remove", "id": job_id}, ctx())).content == (
        f"Removed cron job {job_id}."
    )
    assert job_id not in (await tool.run({"action": "list"}, ctx())).content


async def test_empty_list_says_so(tool: CronTool) -> None:
    assert (await tool.run({"action": "list"}, ctx())).content == "No cron jobs."


async def test_owner_delivery_and_chat_sessions_are_accepted(tool: CronTool, store: Store) -> None:
    await tool.run(
        {"action": "add", "at": "+1h", "message": "x", "deliver_to": "owner", "session": "chat"},
        ctx(origin=None),
    )
    [job] = await CronJobs(store).all()
    assert job.deliver_to == "owner" and job.session_mode == "chat"
    assert job.next_run_at == NOW + 3600


async def test_someone_other_than_the_owner_schedules_only_into_their_own_chat(
    tool: CronTool, store: Store
) -> None:
    await tool.run({"action": "add", "at": "+1h", "message": "owner's"}, ctx())
    other = ChatRef("telegram", "bot", "dm", "u2")
    theirs = ctx(origin=encode_chat(other), peer="u2")  # allowed, but not the owner
    for deliver_to in ("owner", "last"):
        for session in ("chat", "isolated"):
            args = {"at": "+2s", "message": "x", "deliver_to": deliver_to, "session": session}
            with pytest.raises(ToolError, match="only the owner may schedule into another chat"):
                await tool.run({"action": "add", **args}, theirs)
    await tool.run({"action": "add", "at": "+1h", "message": "mine", "session": "chat"}, theirs)
    jobs = {job.message: job for job in await CronJobs(store).all()}
    owners, mine = jobs["owner's"], jobs["mine"]
    assert decode_chat(mine.deliver_to) == other and mine.session_mode == "chat"
    listed = (await tool.run({"action": "list"}, theirs)).content
    assert "mine" in listed and "owner's" not in listed
    with pytest.raises(ToolError, match="no cron job with id"):
        await tool.run({"action": "remove", "id": owners.id}, theirs)
    assert len((await tool.run({"action": "list"}, ctx())).content.splitlines()) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "action must be add, list or remove"),
        ({"action": "edit"}, "action must be add, list or remove"),
        ({"action": "add", "message": "x"}, "exactly one schedule"),
        ({"action": "add", "at": "+1h", "every": "1h", "message": "x"}, "got at, every"),
        ({"action": "add", "at": "+1h"}, "message is required"),
        ({"action": "add", "at": "+1h", "message": "x" * 4001}, "keep it under 4,000"),
        ({"action": "add", "at": "+1h", "message": "x", "name": "n" * 81}, "name is longer"),
        ({"action": "add", "at": "+1h", "message": 5}, "'message' must be a string"),
        ({"action": "add", "at": "2020-01-01T09:00", "message": "x"}, "in the past"),
        ({"action": "add", "every": "10s", "message": "x"}, "shortest interval is 60 s"),
        ({"action": "add", "cron": "0 9 * *", "message": "x"}, "has 4 fields"),
        ({"action": "add", "at": "+1h", "tz": "Moon/Base", "message": "x"}, "IANA"),
        ({"action": "add", "at": "+1h", "message": "x", "session": "group"}, "isolated or chat"),
        (
            {"action": "add", "at": "+1h", "message": "x", "deliver_to": "telegram:999"},
            "perch cron add --to",
        ),
        (
            {"action": "add", "at": "+1h", "message": "x", "session": "chat", "deliver_to": "none"},
            "needs a chat",
        ),
        ({"action": "add", "when": "+1h", "message": "x"}, "unknown argument"),
        ({"action": "remove"}, "id is required"),
        ({"action": "remove", "id": "nope"}, "no cron job with id 'nope'"),
    ],
)
async def test_invalid_requests_get_errors_the_model_can_act_on(
    tool: CronTool, store: Store, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await tool.run(args, ctx())
    assert await CronJobs(store).all() == []


async def test_here_needs_a_chat(tool: CronTool) -> None:
    with pytest.raises(ToolError, match="not in a chat"):
        await tool.run({"action": "add", "at": "+1h", "message": "x"}, ctx(origin=None))


async def test_sub_agents_cannot_schedule(tool: CronTool) -> None:
    with pytest.raises(ToolError, match="only available to the main agent"):
        await tool.run({"action": "list"}, ctx(depth=1))


async def test_the_number_of_jobs_is_capped(tool: CronTool, store: Store) -> None:
    for _ in range(100):
        await tool.run({"action": "add", "every": "1h", "message": "x"}, ctx())
    with pytest.raises(ToolError, match="already 100 active cron jobs"):
        await tool.run({"action": "add", "every": "1h", "message": "x"}, ctx())
