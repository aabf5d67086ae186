"""Screenshots of the dashboard for the manual (docs/operations/dashboard.md): `.venv/bin/python docs/shoot_dashboard.py`.

Starts a real daemon in a temporary folder (the fake model server of the tests, in-memory
Telegram and Slack channels, one MCP test server), gives it a month of made-up usage, a few
conversations, pairing codes, cron jobs and a reply in flight, logs in with headless
Chromium and saves each page as a PNG in `docs/dashboard/` (desktop width, and the overview
and a conversation at phone width). Needs chromium and chromium-driver (as the tests do).
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.tools.cron import CronRequest  # noqa: E402
from bot.cron.jobs import CronJobs, create_job  # noqa: E402
from bot.process.logs import setup_logging  # noqa: E402
from bot.store.rows import CronRun, PairingRequest  # noqa: E402
from tests.dashboard_support import Browser, dashboard_overrides, start_chromium, stop_chromium  # noqa: E402
from tests.fakes.anthropic import FakeAnthropic, Reply  # noqa: E402
from tests.fakes.chat import MemoryChannel  # noqa: E402
from tests.harness import running_daemon  # noqa: E402
from tests.mcp_servers.running import stdio_entry  # noqa: E402
from tests.waiting import eventually  # noqa: E402

OUT = ROOT / "docs" / "dashboard"
OWNER = "owner1"
MODELS = [
    ("claude-sonnet-5-5", 3.0, 15.0),
    ("local/qwen3:8b", 0.0, 0.0),
    ("claude-haiku-4-5", 1.0, 5.0),
]


async def seed_usage(store: object) -> None:
    rng = random.Random(32)
    now, rows, n = time.time(), [], 50_000
    for days in range(29, -1, -1):
        for model, price_in, price_out in MODELS:
            if model == "claude-haiku-4-5" and days > 12:
                continue
            for _ in range(rng.randint(1, 4)):
                tokens_in = rng.randint(2_000, 40_000 if "sonnet" in model else 15_000)
                tokens_out = rng.randint(200, 2_500)
                cost = (tokens_in * price_in + tokens_out * price_out) / 1e6
                at = now - days * 86400 - rng.randint(0, 3600)
                n += 1
                rows.append(
                    (n, "agent:main:cron:x", f"r{n}", model, tokens_in, tokens_out, 0, 0, cost, at)
                )
    await store.load("usage", rows)  # type: ignore[attr-defined]
    await store.finish_load()  # type: ignore[attr-defined]


async def seed(
    daemon: object, telegram: MemoryChannel, slack: MemoryChannel, fake: FakeAnthropic
) -> asyncio.Event:
    store = daemon.store  # type: ignore[attr-defined]
    fake.queue(
        Reply.tool_use([("read_file", {"path": "MEMORY.md"})], text="Let me check your notes."),
        Reply.text(
            "Your notes say the **dentist** is on Thursday at 9:30, and the car goes in for its "
            "service next Monday. Want a reminder the evening before each?"
        ),
        Reply.text("Done: I'll remind you on Wednesday at 19:00 and on Sunday at 19:00."),
        Reply.text("Deploys are green; the last one was `v2.14.1` at 10:42, no alerts since."),
    )
    await telegram.say("What's on my calendar this week? <b>anything</b> urgent?", chat_id=OWNER)
    await telegram.wait_sent(1)
    await telegram.say("Yes please, remind me the evening before.", chat_id=OWNER)
    await telegram.wait_sent(2)
    await slack.say("How did today's deploys go?", chat_id="D0OPS")
    await slack.wait_sent(1)
    now = time.time()
    for channel, code, sender, name, age in (
        ("telegram", "K7QF2M9X", "55012877", "Sam Rivera", 300),
        ("slack", "H3TZ8PLW", "U04B7DEV", "Dana (ops)", 1500),
    ):
        await store.pairing_add(
            PairingRequest(channel, code, sender, name, now - age, now - age + 3600)
        )
    for channel, code, sender in (
        ("telegram", "AAAA2222", "41177320"),
        ("signal", "BBBB3333", "+4915112345678"),
    ):
        await store.pairing_add(PairingRequest(channel, code, sender, "", now, now + 3600))
        await store.pairing_approve(channel, code)
    jobs = CronJobs(store)
    for request in (
        CronRequest(
            "cron",
            "0 8 * * 1-5",
            "Summarise my inbox and today's calendar",
            name="morning brief",
            tz="Europe/Berlin",
            deliver_to="owner",
        ),
        CronRequest(
            "every",
            "6h",
            "Check the home server's disk space and tell me if any volume is over 85%",
            name="disk check",
            deliver_to="telegram:owner1",
        ),
        CronRequest(
            "at",
            "+3d",
            "Remind me to renew the domain before it expires",
            name="domain",
            deliver_to="owner",
        ),
    ):
        job = await create_job(jobs, request, default_tz="UTC", now=now, min_every=60)
        if job.name != "domain":
            ok = job.name == "morning brief"
            await jobs.record_run(
                CronRun(
                    job.id,
                    now - 7200,
                    now - 7190,
                    "delivered" if ok else "error",
                    "" if ok else "model call failed: overloaded",
                )
            )
    await daemon.scheduler.sync()  # type: ignore[attr-defined]
    await seed_usage(store)
    held = asyncio.Event()
    fake.queue(Reply.text("…", hold=held))
    await telegram.say("Draft a reply to the landlord about the heating", chat_id=OWNER)
    await fake.wait_requests(5)
    logging.getLogger("bot.tools.mcp").warning(
        "mcp server calendar: connection refused; retrying in 4 s (token sk-ant-api03-abcdefghijkl)"
    )
    return held


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    setup_logging("INFO", "text")
    overrides = dashboard_overrides(
        **{
            "channels.telegram.allow_from": [OWNER],
            "channels.slack.allow_from": ["D0OPS"],
            "agent.fallbacks": ["local/qwen3:8b"],
            "agent.budget.daily_usd": 5.0,
            "providers.local": {
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key": "none",
                "models": ["qwen3:8b"],
            },
            "mcp": {"servers": {"files": stdio_entry("files")}},
        }
    )
    telegram, slack = MemoryChannel("telegram"), MemoryChannel("slack")
    with tempfile.TemporaryDirectory() as folder:
        async with (
            FakeAnthropic() as fake,
            running_daemon(
                Path(folder), fake, {"telegram": telegram, "slack": slack}, overrides
            ) as daemon,
        ):
            held = await seed(daemon, telegram, slack, fake)
            driver = await asyncio.to_thread(start_chromium)
            try:
                browser = Browser(driver, daemon.parts.web.url)
                await browser.login()
                await eventually(  # the MCP server connects
                    lambda: daemon.status().get("mcp", {}).get("files", {}).get("state") == "up",
                    timeout=20,
                )
                key = f"agent:main:telegram:bot:dm:{OWNER}"
                shots = [
                    ("overview", "/"),
                    ("sessions", "/sessions"),
                    ("conversation", f"/sessions/view?key={key}"),
                    ("pairing", "/pairing"),
                    ("cron", "/cron"),
                    ("usage", "/usage"),
                    ("logs", "/logs"),
                ]
                for name, path in shots:
                    await browser.open(path)
                    if name == "conversation":
                        await browser.click("details.tool summary")
                    await browser.screenshot(OUT / f"{name}.png", 1280)
                    print(f"wrote {OUT / name}.png")
                for name, path in (
                    ("overview", "/"),
                    ("conversation", f"/sessions/view?key={key}"),
                ):
                    await browser.open(path)
                    await browser.screenshot(OUT / f"{name}-phone.png", 390, phone=True)
                    print(f"wrote {OUT / name}-phone.png")
            finally:
                await asyncio.to_thread(stop_chromium, driver)
                held.set()


if __name__ == "__main__":
    asyncio.run(main())
