"""Waiting well, on a channel without buttons (the in-process chat channel): a turn waiting
for an approval holds no run slot another chat needs; a group's request goes to the owner's
DM; `/stopall` cancels a pending approval; `approver: requester` asks whoever started the
turn, and only they count."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.approvals.support import audit, exec_settings, last_tool_result, workspace_file
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

pytestmark = pytest.mark.timeout(300)
WAIT = 60
OWNER, OTHER, GROUP = "u1", "u2", "g1"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def settings(**approvals: Any) -> dict[str, Any]:
    return {
        "channels.telegram.allow_from": [OWNER, OTHER],
        "channels.telegram.groups": [GROUP],
        "agent.max_concurrent_runs": 1,
        **exec_settings(**approvals),
    }


async def request_in(chan: MemoryChannel, chat_id: str, seen: int = 0) -> str:
    """The id of the next approval request sent to `chat_id`, after `seen` of them."""

    def found() -> list[str]:
        return re.findall(r"Approval needed \(([a-z0-9]+)\)", "\n".join(chan.texts(chat_id)))

    async with asyncio.timeout(WAIT):
        while len(found()) <= seen:
            await chan.wait_sent(len(chan.sent) + 1, WAIT)
    return found()[seen]


async def sent_to(chan: MemoryChannel, chat_id: str, fragment: str) -> None:
    async with asyncio.timeout(WAIT):
        while not any(fragment in t for t in chan.texts(chat_id)):
            await chan.wait_sent(len(chan.sent) + 1, WAIT)


async def test_a_waiting_turn_leaves_its_run_slot_to_other_chats(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    target = workspace_file(tmp_path, "a.txt")
    chan = MemoryChannel("telegram")
    overrides = settings(timeout="10m")  # a held slot would keep the other chat waiting
    async with running_daemon(tmp_path, model, {"telegram": chan}, overrides) as daemon:
        model.queue(Reply.tool_use([("exec", {"command": "rm a.txt"})]))
        await chan.say("delete a.txt", chat_id=OWNER)
        approval = await request_in(chan, OWNER)
        await chan.say("hello", chat_id=OTHER)  # one run slot in all: the waiting turn lent it
        await sent_to(chan, OTHER, "echo: hello")
        assert target.exists()
        await chan.say(f"/approve {approval}", chat_id=OWNER)
        await model.wait_requests(3, timeout=WAIT)
        assert not target.exists()
        assert last_tool_result(model).startswith("[approved by the owner]")
        [row] = await audit(daemon)
        assert (row.status, row.requester, row.approver) == (
            "approved",
            f"telegram:{OWNER}",
            f"telegram:{OWNER}",
        )


async def test_a_groups_request_goes_to_the_owners_dm_and_stopall_cancels_it(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    target = workspace_file(tmp_path, "a.txt")
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, model, {"telegram": chan}, settings()) as daemon:
        model.queue(Reply.tool_use([("exec", {"command": "rm a.txt"})]))
        await chan.say("delete a.txt", chat_id=GROUP, sender=OTHER, group=True)
        approval = await request_in(chan, OWNER)
        assert not any("Approval needed" in t for t in chan.texts(GROUP))
        await chan.say("/stopall", chat_id=GROUP, sender=OTHER, group=True)
        await sent_to(chan, OWNER, f"Approval {approval}: Stopped before an answer")
        await chan.say(f"/approve {approval}", chat_id=OWNER)
        await sent_to(chan, OWNER, "answered already")
        assert target.exists()
        [row] = await audit(daemon)
        assert row.status == "cancelled" and row.requester == f"telegram:{OTHER}"


async def test_approver_requester_asks_whoever_started_the_turn(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    target = workspace_file(tmp_path, "a.txt")
    chan = MemoryChannel("telegram")
    overrides = settings(approver="requester")
    async with running_daemon(tmp_path, model, {"telegram": chan}, overrides) as daemon:
        model.queue(Reply.tool_use([("exec", {"command": "rm a.txt"})]))
        await chan.say("delete a.txt", chat_id=GROUP, sender=OTHER, group=True)
        approval = await request_in(chan, OTHER)
        await chan.say(f"/approve {approval}", chat_id=OWNER)  # the owner is not asked here
        await sent_to(chan, OWNER, "Only the approver")
        assert target.exists()
        await chan.say(f"/deny {approval}", chat_id=OTHER)
        await model.wait_requests(2, timeout=WAIT)
        assert target.exists() and "Denied by the owner: u2 said no" in last_tool_result(model)
        [row] = await audit(daemon)
        assert (row.status, row.approver) == ("denied", f"telegram:{OTHER}")


async def test_always_in_this_chat_is_remembered_for_that_command_only(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        workspace_file(tmp_path, name)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, model, {"telegram": chan}, settings()) as daemon:
        model.queue(Reply.tool_use([("exec", {"command": "rm -f a.txt b.txt"})]))
        await chan.say("clean up", chat_id=OWNER)
        approval = await request_in(chan, OWNER)
        await chan.say(f"/approve {approval} always", chat_id=OWNER)
        await model.wait_requests(2, timeout=WAIT)
        await chan.wait_sent(3, WAIT)  # the request, the answer to /approve, the reply

        model.queue(Reply.tool_use([("exec", {"command": "rm -f a.txt b.txt"})]))
        await chan.say("again", chat_id=OWNER)  # the same command: not asked
        await model.wait_requests(4, timeout=WAIT)
        assert last_tool_result(model).startswith("[approved by the owner]")

        model.queue(Reply.tool_use([("exec", {"command": "rm c.txt"})]))
        await chan.say("and c", chat_id=OWNER)  # another command: asked
        second = await request_in(chan, OWNER, seen=1)
        assert second != approval
        await chan.say(f"/deny {second}", chat_id=OWNER)
        await model.wait_requests(6, timeout=WAIT)
        rows = await audit(daemon)
        assert [(r.status, r.remembered, r.reason) for r in rows] == [
            ("approved", True, ""),
            ("approved", True, "always allowed in this chat"),
            ("denied", False, ""),
        ]
