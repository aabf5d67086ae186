"""Channels stand alone: Perch with one platform subpackage deleted still runs the others.

Each test copies the product packages to a temporary directory without `channels/<platform>/`,
runs `perch run` from that copy in a subprocess (the editable install's finder, which would
find the deleted subpackage in the checkout, is taken out first, and the launcher refuses to
run if the platform can still be imported), and checks that each remaining platform receives
a message from its fake server and delivers the model's answer.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.signal import FakeSignal
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[2]
PLATFORMS = ("telegram", "slack", "signal")
SIGNAL_BOT = "+15550001"
ALICE_SIGNAL = "+15550002"
API_KEY = "sk-ant-test-0123456789"

# Run `perch` from the copy only: drop the editable install's finder, check the removed
# platform is really gone, then start the CLI as `python -m bot.operator.cli` would.
LAUNCHER = """\
import importlib.util, runpy, sys
root, removed = sys.argv[1], sys.argv[2]
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
import channels
if not channels.__file__.startswith(root) or importlib.util.find_spec("channels." + removed):
    sys.exit("launcher: channels." + removed + " is still importable; not testing the copy")
sys.argv = ["perch", *sys.argv[3:]]
runpy.run_module("bot.operator.cli", run_name="__main__", alter_sys=True)
"""


def copy_without(platform: str, into: Path) -> Path:
    """The product (its packages and bootstrap/) copied without one platform."""
    packages = [
        p
        for p in REPO.iterdir()
        if (p / "__init__.py").is_file() and p.name not in ("tests", "bench")
    ]
    assert {"agents", "bot", "channels"} <= {p.name for p in packages}
    ignore = shutil.ignore_patterns("__pycache__")
    for source in [*packages, REPO / "bootstrap"]:
        shutil.copytree(source, into / source.name, ignore=ignore)
    shutil.rmtree(into / "channels" / platform)
    (into / "launch.py").write_text(LAUNCHER)
    return into


@dataclass
class Platform:
    """One running platform fake: its config section and a round trip through it."""

    options: dict[str, Any]
    ready: Callable[[], Awaitable[None]]
    round_trip: Callable[[], Awaitable[str]]  # sends "from <key>", returns the delivered text


async def telegram(stack: AsyncExitStack) -> Platform:
    tg = await stack.enter_async_context(FakeTelegram())

    async def ready() -> None:
        pass  # an update waits in the fake until the long poll takes it

    async def round_trip() -> str:
        tg.dm("from telegram", user_id=42)
        await tg.wait_for("sendMessage", 1, timeout=30)
        return tg.texts()[0]

    options = {"enabled": True, "token": TOKEN, "base_url": tg.base_url, "allow_from": ["42"]}
    return Platform(options, ready, round_trip)


async def slack(stack: AsyncExitStack) -> Platform:
    sl = FakeSlack()
    await sl.start()
    stack.push_async_callback(sl.stop)

    async def ready() -> None:
        await sl.wait_connections(1, timeout=30)

    async def round_trip() -> str:
        event = {
            "type": "message",
            "channel": "D100",
            "channel_type": "im",
            "user": "UALICE",
            "text": "from slack",
            "ts": sl.new_ts(),
        }
        await sl.push_event(event)
        calls = await sl.wait_for("chat.postMessage", 1, timeout=30)
        return str(calls[0].params["text"])

    options = {
        "enabled": True,
        "bot_token": "xoxb-t",
        "app_token": "xapp-t",
        "base_url": sl.base_url,
        "allow_from": ["UALICE"],
    }
    return Platform(options, ready, round_trip)


async def signal(stack: AsyncExitStack) -> Platform:
    sg = await stack.enter_async_context(FakeSignal(SIGNAL_BOT))

    async def ready() -> None:
        await sg.wait_connected(within=30)

    async def round_trip() -> str:
        await sg.dm(ALICE_SIGNAL, "from signal")
        await sg.wait_for(lambda: len(sg.sent) >= 1, within=30)
        return str(sg.sent[0]["message"])

    options = {
        "enabled": True,
        "number": SIGNAL_BOT,
        "service_url": sg.url,
        "allow_from": [ALICE_SIGNAL],
    }
    return Platform(options, ready, round_trip)


FAKES = {"telegram": telegram, "slack": slack, "signal": signal}


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.mark.parametrize("removed", PLATFORMS)
async def test_perch_runs_the_other_platforms_with_one_platform_subpackage_deleted(
    tmp_path: Path, model: FakeAnthropic, removed: str
) -> None:
    product = copy_without(removed, tmp_path / "product")
    home = tmp_path / "home"
    home.mkdir()
    kept = [key for key in PLATFORMS if key != removed]
    async with AsyncExitStack() as stack:
        platforms = {key: await FAKES[key](stack) for key in kept}
        config = {
            "providers": {
                "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": model.base_url}
            },
            "heartbeat": {"every": 0},
            "channels": {"console": {"enabled": False}}
            | {key: p.options for key, p in platforms.items()},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(product / "launch.py"),
            str(product),
            removed,
            "run",
            "--config",
            str(home / "config.yaml"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=home,
            env={**env, "ANTHROPIC_API_KEY": API_KEY},
        )
        try:
            ready = asyncio.gather(*(p.ready() for p in platforms.values()))
            exited = asyncio.ensure_future(proc.wait())
            await asyncio.wait([exited, ready], return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                ready.cancel()
                _, err = await proc.communicate()
                pytest.fail(f"perch exited with {proc.returncode}: {err.decode()[-2000:]}")
            exited.cancel()
            await ready
            answers = await asyncio.gather(*(p.round_trip() for p in platforms.values()))
            assert answers == [f"echo: from {key}" for key in kept]
        finally:
            if proc.returncode is None:
                proc.terminate()
            _, err = await asyncio.wait_for(proc.communicate(), 30)
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
