"""Skills in a running daemon: offered in the prompt, read with read_skill, changed on disk and
seen on the next message without a restart, listed by /skills; a bad skill breaks nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.skill_folders import agentskills_skill, nanobot_skill, write_skill

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def system_text(request: dict[str, object]) -> str:
    blocks = request["system"]
    assert isinstance(blocks, list)
    return "\n".join(block["text"] for block in blocks)


async def test_skills_are_offered_read_and_reloaded_while_the_daemon_runs(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    skills = tmp_path / "workspace" / "skills"
    agentskills_skill(skills)
    nanobot_skill(skills)  # its binary is missing: listed by /skills, never offered
    write_skill(skills, "broken", "---\nname: broken\ndescription: [oops\n---\n")
    huge = write_skill(skills, "huge", "---\nname: huge\ndescription: x\n---\n")
    (huge / "SKILL.md").write_text("---\nname: huge\ndescription: x\n---\n" + "x" * 5_000_000)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        fake.queue(
            Reply.tool_use([("read_skill", {"name": "pdf-processing"})]),
            Reply.text("Read it."),
        )
        await chan.say("please extract the text of report.pdf")
        assert await chan.wait_sent(1) == ["Read it."]
        first = system_text(fake.requests[0])
        assert "<name>pdf-processing</name>" in first and "<name>skill-creator</name>" in first
        assert "tmux-control" not in first and "broken" not in first and "huge" not in first
        assert "read_skill" in [tool["name"] for tool in fake.requests[0]["tools"]]
        answer = json.dumps(fake.requests[1]["messages"][-1])
        assert "Run `python3 scripts/extract.py input.pdf`" in answer

        shutil.rmtree(skills / "pdf-processing")
        write_skill(
            skills, "weekly-report", "---\nname: weekly-report\ndescription: Fridays.\n---\n"
        )
        await chan.say("and now?")
        await chan.wait_sent(2)
        second = system_text(fake.requests[-1])
        assert "<name>weekly-report</name>" in second and "pdf-processing" not in second

        await chan.say("/skills")
        listing = (await chan.wait_sent(3))[-1]
    assert listing.startswith("Skills I can use (2):\n- skill-creator: ")
    assert "- weekly-report: Fridays." in listing
    assert "- tmux-control (workspace): missing bin perch-test-tmux" in listing
    assert "- broken (workspace): the front matter is not valid YAML" in listing
    assert (
        "- huge (workspace): SKILL.md is 5,000,034 bytes; skills are read up to 262,144" in listing
    )


async def test_with_read_skill_denied_no_skills_are_offered(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agentskills_skill(tmp_path / "workspace" / "skills")
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.tools.deny": ["read_skill"]}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides):
        await chan.say("hello")
        await chan.wait_sent(1)
    assert "## Skills" not in system_text(fake.requests[0])
    assert "read_skill" not in [tool["name"] for tool in fake.requests[0]["tools"]]
