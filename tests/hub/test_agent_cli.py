"""`--agent ID` on `perch chat|send|sessions|cron|usage`, called as a user types them
(`bot.operator.cli.main` in a thread), through the running daemon's socket and without it;
and the `cron` tool of one agent never sees or removes another's jobs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agents.tools.cron import CronRequest
from bot.cron.book import JobBook
from bot.fleet.cron_scope import AgentJobBook, agent_of_creator, cli_creator
from bot.operator.cli import main
from bot.store.open import open_store
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.harness import make_config, running_daemon

pytestmark = pytest.mark.timeout(180)

WORK = {"agents": [{"id": "work", "model": "claude-haiku-4-5"}]}


async def perch(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


def by_model(body: dict[str, Any]) -> Reply:
    return Reply.text(f"from {body['model']}")


async def test_agent_flags_through_the_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}, WORK) as daemon:
        fake.default = by_model
        config = str(daemon.config.source)
        assert await perch("chat", "-m", "hi", "--agent", "work", "--config", config) == 0
        assert capsys.readouterr().out == "from claude-haiku-4-5\n"
        assert await perch("chat", "-m", "hi", "--config", config) == 0
        assert capsys.readouterr().out == "from claude-sonnet-5-5\n"
        assert await perch("chat", "-m", "hi", "--agent", "ghost", "--config", config) == 2
        assert "no such agent (agents: main, work)" in capsys.readouterr().err

        assert await perch("sessions", "--agent", "work", "--config", config) == 0
        listing = capsys.readouterr().out
        assert "agent:work:cli:local:dm:owner" in listing and "agent:main:" not in listing

        assert await perch("usage", "--agent", "work", "--json", "--config", config) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert [row["model"] for row in rows] == ["claude-haiku-4-5"]

        add = ["cron", "add", "--every", "1h", "-m", "check the build", "--agent", "work"]
        assert await perch(*add, "--config", config) == 0
        capsys.readouterr()
        assert await perch("cron", "list", "--agent", "main", "--config", config) == 0
        assert "check the build" not in capsys.readouterr().out
        assert await perch("cron", "list", "--agent", "work", "--config", config) == 0
        shown = capsys.readouterr().out
        assert "check the build" in shown and "agent: work" in shown
        job_id = shown.split()[0]
        assert await perch("cron", "rm", job_id, "--agent", "main", "--config", config) == 1
        assert await perch("cron", "rm", job_id, "--agent", "work", "--config", config) == 0
        assert (
            await perch("send", "--to", "owner", "x", "--agent", "ghost", "--config", config) == 2
        )


async def test_chat_with_an_agent_runs_in_process_without_a_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake:
        fake.default = by_model
        config = make_config(tmp_path, fake.base_url, WORK)
        path = str(config.source)
        assert await perch("chat", "-m", "hi", "--agent", "work", "--config", path) == 0
        assert capsys.readouterr().out == "from claude-haiku-4-5\n"
        assert (tmp_path / "workspace-work").is_dir()  # its own workspace, seeded


async def test_each_agents_cron_tool_sees_and_removes_only_its_own_jobs(tmp_path: Path) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9", WORK)
    store = await open_store(tmp_path / "data" / "perch.db")
    try:
        book = JobBook(config, store)
        main, work = AgentJobBook(book, "main", "main"), AgentJobBook(book, "work", "main")
        mine = await work.add_job(
            CronRequest("every", "1h", "water the plants", created_by="agent:work:cli:local:dm:o")
        )
        theirs = await main.add_job(
            CronRequest("every", "1h", "pay the rent", created_by="agent:main:cli:local:dm:o")
        )
        assert [j.message for j in await work.list_jobs()] == ["water the plants"]
        assert [j.message for j in await main.list_jobs()] == ["pay the rent"]
        assert not await work.remove_job(theirs.id)
        assert await work.remove_job(mine.id)
        assert [j.message for j in await main.list_jobs()] == ["pay the rent"]
    finally:
        await store.close()


def test_a_jobs_agent_is_read_from_who_made_it() -> None:
    cases = [
        ("agent:work:telegram:b:dm:1", "work"),
        ("agent:main:cron:x", "main"),
        (cli_creator("work", "main"), "work"),
        (cli_creator("main", "main"), "main"),
        ("cli", "main"),
        ("", "main"),
    ]
    for created_by, agent in cases:
        assert agent_of_creator(created_by, "main") == agent
