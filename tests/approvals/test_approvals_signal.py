"""Approvals on a platform without buttons (Signal, through the fake signal-cli REST API):
the owner's DM gets the request as text and answers `/approve <id>` or `/deny <id>`; another
allowed user's command is refused; no answer in time is a denial; a request a crashed daemon
left pending is denied at the next start, and the owner is told."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.daemon import Daemon
from bot.operator.cli import main
from bot.store.open import open_store
from bot.store.rows import ApprovalRow
from tests.approvals.support import (
    audit,
    exec_settings,
    last_tool_result,
    script_exec,
    workspace_file,
)
from tests.dashboard_support import TOKEN, dashboard_overrides
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.signal import FakeSignal
from tests.harness import make_config

pytestmark = pytest.mark.timeout(300)
WAIT = 60
BOT, ALICE, BOB = "+15550001", "+15550002", "+15550003"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def signal_settings(sg: FakeSignal, timeout: str) -> dict[str, object]:
    return {
        "channels.signal": {
            "enabled": True,
            "number": BOT,
            "service_url": sg.url,
            "allow_from": [ALICE, BOB],
        },
        **exec_settings(timeout=timeout),
    }


async def next_request(sg: FakeSignal, seen: int) -> str:
    """The id of the next approval request sent (after `seen` of them)."""

    def requests() -> list[str]:
        return [m["message"] for m in sg.sent if "Approval needed (" in m.get("message", "")]

    await sg.wait_for(lambda: len(requests()) > seen, WAIT)
    text = requests()[seen]
    assert "/approve" in text and "/deny" in text
    match = re.search(r"Approval needed \(([a-z0-9]+)\)", text)
    assert match is not None
    return match.group(1)


def replies_to(sg: FakeSignal, who: str) -> list[str]:
    return [m["message"] for m in sg.sent if m.get("recipients") == [who]]


async def perch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    return code, capsys.readouterr().out


async def test_typed_answers_on_signal(
    tmp_path: Path, model: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = workspace_file(tmp_path, "a.txt"), workspace_file(tmp_path, "b.txt")
    async with FakeSignal(BOT) as sg:
        daemon = Daemon(make_config(tmp_path, model.base_url, signal_settings(sg, "4s")))
        await daemon.start()
        try:
            await sg.wait_connected(within=WAIT)
            script_exec(model, "rm a.txt")
            await sg.dm(ALICE, "delete a.txt")
            approval = await next_request(sg, 0)
            await sg.dm(BOB, f"/approve {approval}")  # allowed to talk, not to approve
            await sg.wait_for(lambda: bool(replies_to(sg, BOB)), WAIT)
            assert "Only the approver" in replies_to(sg, BOB)[-1]
            assert first.exists()
            await sg.dm(ALICE, f"/approve {approval}")
            await model.wait_requests(2, timeout=WAIT)
            assert not first.exists()
            assert last_tool_result(model).startswith("[approved by the owner]")

            script_exec(model, "rm b.txt")
            await sg.dm(ALICE, "now b.txt")
            await next_request(sg, 1)  # nobody answers
            await model.wait_requests(4, timeout=WAIT)
            assert second.exists()
            assert "no answer within 4 seconds" in last_tool_result(model)

            rows = await audit(daemon)
            assert [(r.status, r.decided_by) for r in rows] == [
                ("approved", f"signal:{ALICE}"),
                ("timeout", ""),
            ]
            config = str(daemon.config.source)
            code, out = await perch(capsys, "approvals", "--json", "--config", config)
            listed = json.loads(out)["approvals"]
            assert code == 0 and [r["status"] for r in listed] == ["timeout", "approved"]
            assert listed[1]["summary"] == "rm a.txt" and listed[1]["approver"] == f"signal:{ALICE}"
        finally:
            await daemon.stop()
        code, out = await perch(capsys, "approvals", "--config", config)  # no daemon: the same
        assert code == 0 and "rm b.txt" in out and "approved   exec" in out


async def test_a_restart_denies_what_was_pending_and_says_so(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    async with FakeSignal(BOT) as sg:
        settings = {**signal_settings(sg, "5m"), **dashboard_overrides()}
        config = make_config(tmp_path, model.base_url, settings)
        store = await open_store(config.store_target)  # as a crashed daemon left it
        await store.approval_add(
            ApprovalRow(
                id="k7m2pq",
                created_at=time.time() - 60,
                session_key=f"agent:main:signal:{BOT}:dm:{ALICE}",
                origin="",
                tool="exec",
                summary="rm -rf projects",
                requester=f"signal:{ALICE}",
                approver=f"signal:{ALICE}",
                instance="crashed",
            )
        )
        await store.close()
        daemon = Daemon(config)
        await daemon.start()
        try:
            await sg.wait_for(lambda: bool(replies_to(sg, ALICE)), WAIT)
            told = replies_to(sg, ALICE)[-1]
            assert "restarted while approval k7m2pq" in told and "rm -rf projects" in told
            [row] = await audit(daemon)
            assert row.status == "restart" and row.decided_at is not None
            assert daemon.parts is not None and daemon.parts.web is not None
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            url = daemon.parts.web.url + "approvals"  # the dashboard shows the audit too
            async with aiohttp.ClientSession() as http, http.get(url, headers=bearer) as page:
                html = await page.text()
            assert page.status == 200 and 'data-id="k7m2pq" data-status="restart"' in html
            assert "rm -rf projects" in html
            await sg.dm(ALICE, "/approve k7m2pq")  # too late
            await sg.wait_for(lambda: len(replies_to(sg, ALICE)) >= 2, WAIT)
            assert "answered already" in replies_to(sg, ALICE)[-1]
        finally:
            await daemon.stop()
