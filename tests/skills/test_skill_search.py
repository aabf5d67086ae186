"""Skill search mode, end to end: a workspace with more skills than `skills.search_above`
lists only its `always` skills in the prompt, offers `skill_search`, and the search finds the
skill a task needs; a small workspace lists them all and offers no search."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.skill_folders import write_skill

TOPICS = [
    ("weather-report", "Get current weather and the forecast for a city"),
    ("pdf-invoices", "Turn PDF invoices into CSV rows for bookkeeping"),
    ("git-release", "Tag a release in a git repository and write its changelog"),
    ("recipe-planner", "Plan meals for the week and write a shopping list"),
    ("flight-status", "Look up whether a flight is delayed or cancelled"),
    ("photo-resize", "Shrink and crop photos for the web with ImageMagick"),
]


def write_skills(workspace: Path, count: int) -> None:
    root = workspace / "skills"
    for n in range(count):
        name, what = (
            TOPICS[n]
            if n < len(TOPICS)
            else (f"helper-{n:02d}", f"Chore number {n:02d} of the household ledger")
        )
        write_skill(
            root,
            name,
            f"---\nname: {name}\ndescription: {what}.\n---\n\n# {name}\n\n{what}, step by step.\n",
        )
    write_skill(
        root,
        "house-rules",
        "---\nname: house-rules\ndescription: How to talk to the family.\nalways: true\n---\n\nBe brief.\n",
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def tool_names(body: dict[str, object]) -> list[str]:
    return [t["name"] for t in body["tools"]]  # type: ignore[index, union-attr]


def system_text(body: dict[str, object]) -> str:
    return "".join(b["text"] for b in body["system"])  # type: ignore[index, union-attr]


async def test_sixty_skills_switch_to_search_and_skill_search_finds_the_right_one(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.queue(
        Reply.tool_use([("skill_search", {"query": "make a spreadsheet out of my invoice PDFs"})]),
        Reply.text("I'll use pdf-invoices."),
    )
    async with ChatReplay(fake, tmp_path) as chat:
        write_skills(chat.workspace, 60)
        await chat.say("Can you make a spreadsheet out of the invoice PDFs I got?")
    first, after = fake.requests
    system = system_text(first)
    assert "too many to list" in system and "skill_search" in system
    assert "house-rules" in system and "Be brief." in system  # the always skill, in full
    assert "pdf-invoices" not in system and "helper-07" not in system
    assert "skill_search" in tool_names(first)
    result = after["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    lines = result["content"].splitlines()
    assert (
        lines[0].startswith("- pdf-invoices (match ") and "Turn PDF invoices into CSV" in lines[0]
    )
    assert not any("helper-" in line for line in lines)  # the chores do not match


async def test_a_small_skill_set_is_listed_whole_without_a_search_tool(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    async with ChatReplay(fake, tmp_path) as chat:
        write_skills(chat.workspace, 6)
        await chat.say("hello")
    system = system_text(fake.requests[0])
    assert "pdf-invoices" in system and "too many to list" not in system
    assert "skill_search" not in tool_names(fake.requests[0])


async def test_the_threshold_is_the_configs(fake: FakeAnthropic, tmp_path: Path) -> None:
    async with ChatReplay(fake, tmp_path, {"skills.search_above": 3}) as chat:
        write_skills(chat.workspace, 6)
        await chat.say("hello")
    assert "skill_search" in tool_names(fake.requests[0])
