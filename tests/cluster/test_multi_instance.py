"""Two `perch run` processes on one throwaway PostgreSQL database (issue 18, part 2).

Black-box: real daemons, the Telegram wire fake, the fake model. In webhook mode the test
plays Telegram: it posts each update to the instances' webhook ports alternately and, like
Telegram, posts it again (to the other instance) when a post is not answered 200. Without
PostgreSQL binaries on the machine these are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from agents.tools.cron import CronRequest
from bot.cron.jobs import CronJobs, create_job
from bot.store.open import open_store
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import running_daemon
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(150)

SECRET = "hook-s3cret"
OWNER = 42
_message_ids = itertools.count(1)


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Instance:
    """One `perch run` process with its own directory (workspace, status file, logs)."""

    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        self.port = port
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    @classmethod
    def configure(
        cls,
        home: Path,
        model: FakeAnthropic,
        tg: FakeTelegram,
        url: str,
        mode: str,
        heartbeat: str = "0",
    ) -> Instance:
        home.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        telegram: dict[str, Any] = {
            "enabled": True,
            "token": TOKEN,
            "base_url": tg.base_url,
            "dm_policy": "open",
            "allow_from": [str(OWNER), "*"],
            "streaming": "off",
            "poll_timeout": 1,
        }
        if mode == "webhook":
            telegram |= {
                "mode": "webhook",
                "webhook_url": "https://bot.example/tg/hook",
                "webhook_secret": SECRET,
                "webhook_port": port,
            }
        config = {
            "providers": {
                "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": model.base_url}
            },
            "heartbeat": {"every": heartbeat},
            "gateway": {"shutdown_grace": "3s"},
            "agent": {"queue": {"mode": "followup"}},
            "store": {"url": url, "lease": "3s"},
            "channels": {"console": {"enabled": False}, "telegram": telegram},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        return cls(home, port)

    async def start(self) -> None:
        self.starts += 1
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}
        log = (self.home / "perch.log").open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.operator.cli", "run", "--config", str(self.home / "config.yaml"),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=self.home,
        )  # fmt: skip
        log.close()

    @property
    def log(self) -> str:
        return (self.home / "perch.log").read_text(errors="replace")

    async def wait_ready(self, timeout: float = 120) -> None:
        """Until this start (not an earlier one in the same log) says it is ready and has its
        model SDK loaded (a busy machine takes seconds for that: the first turn would wait
        for it, and a wait for its answer would measure the machine, not Perch)."""
        await eventually(lambda: self._started("Perch ready"), timeout=timeout)
        await eventually(lambda: self._started("model providers loaded"), timeout=timeout)

    def _started(self, line: str) -> bool:
        return self.log.count(line) == self.starts

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()

    async def stop(self) -> int:
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), 30)


@contextlib.asynccontextmanager
async def instances(*items: Instance) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for item in items:
            if item.proc is not None and item.proc.returncode is None:
                with contextlib.suppress(Exception):
                    await item.stop()
                if item.proc.returncode is None:
                    item.kill()
                    await item.proc.wait()


def dm_update(user: int, text: str) -> dict[str, Any]:
    n = next(_message_ids)
    return {
        "update_id": n,
        "message": {
            "message_id": n,
            "date": int(time.time()),
            "chat": {"id": user, "type": "private", "first_name": f"U{user}"},
            "from": {"id": user, "is_bot": False, "first_name": f"U{user}"},
            "text": text,
        },
    }


async def deliver(http: aiohttp.ClientSession, ports: list[int], update: dict[str, Any]) -> int:
    """Post like Telegram: until one instance answers 200 (the next port after a failure)."""
    for attempt in range(40):
        port = ports[attempt % len(ports)]
        try:
            async with http.post(
                f"http://127.0.0.1:{port}/tg/hook",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            ) as response:
                if response.status == 200:
                    return port
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05 * attempt)
    raise AssertionError(f"no instance took update {update['update_id']}")


async def until(condition: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """`eventually` for a condition that must ask the database."""
    try:
        async with asyncio.timeout(timeout):
            while not await condition():  # noqa: ASYNC110 (the state is in the database)
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"condition not met within {timeout} s") from None


async def _nothing_pending(url: str) -> bool:
    store = await open_store(url)
    try:
        return not await store.inbox_pending()
    finally:
        await store.close()


async def test_dms_split_across_two_instances_are_answered_once_when_one_is_killed(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, pg_url: str
) -> None:
    gate = asyncio.Event()  # the model answers nothing until one instance is dead
    model.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    one = Instance.configure(tmp_path / "one", model, tg, pg_url, "webhook")
    two = Instance.configure(tmp_path / "two", model, tg, pg_url, "webhook")
    users = [1000 + u for u in range(60)]
    texts = [f"m{n} from {users[n % len(users)]}" for n in range(300)]
    async with instances(one, two), aiohttp.ClientSession() as http:
        await one.start()
        await two.start()
        await one.wait_ready()
        await two.wait_ready()
        ports = [one.port, two.port]
        took: Counter[int] = Counter()
        half = len(texts) // 2
        for n, text in enumerate(texts[:half]):  # alternately, as a load balancer would
            update = dm_update(users[n % len(users)], text)
            took[await deliver(http, ports[n % 2 :] + ports[: n % 2], update)] += 1
        assert took[one.port] > 0 and took[two.port] > 0
        # both are mid-run (their model calls are held) when one is killed
        await eventually(lambda: len(model.requests) >= 8, timeout=30)
        one.kill()
        await one.proc.wait()  # type: ignore[union-attr]
        for n, text in enumerate(texts[half:], start=half):  # the dead port refuses: the other
            update = dm_update(users[n % len(users)], text)
            await deliver(http, ports[n % 2 :] + ports[: n % 2], update)
        gate.set()
        await tg.wait_for("sendMessage", len(texts), timeout=90)
        await eventually(lambda: "took over" in two.log, timeout=30)
        await until(lambda: _nothing_pending(pg_url), timeout=30)  # then count answers
        assert await two.stop() == 0, two.log[-3000:]
    answers = Counter(tg.texts())
    assert answers == Counter(f"echo: {t}" for t in texts), [
        (t, c) for t, c in answers.items() if c != 1
    ]
    # DMs ran one at a time across both instances: every history alternates, complete
    store = await open_store(pg_url)
    try:
        sessions = await store.list_sessions()
        assert len(sessions) == len(users)
        for session in sessions:
            roles = [m["role"] for m in await store.messages(session.id)]
            assert roles == ["user", "assistant"] * (len(texts) // len(users)), session.key
    finally:
        await store.close()


async def test_a_cron_job_due_while_one_instance_is_down_fires_once(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, pg_url: str
) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        which = "both up" if "'both up'" in last_user_text(body) else "one down"
        return Reply.text(f"cron says: {which}")

    model.default = reply
    one = Instance.configure(tmp_path / "one", model, tg, pg_url, "webhook")
    two = Instance.configure(tmp_path / "two", model, tg, pg_url, "webhook")
    async with instances(one, two):
        await one.start()
        await two.start()
        await one.wait_ready()
        await two.wait_ready()
        store = await open_store(pg_url)
        try:
            jobs = CronJobs(store)
            both = await create_job(
                jobs, _at(time.time() + 3, "both up"), default_tz="UTC", now=time.time()
            )
            await until(lambda: _settled(store, both.id), timeout=40)
            # (killed between delivering and recording, an instance's job would run again
            # on the other one: at least once, never zero times)
            one.kill()
            await one.proc.wait()  # type: ignore[union-attr]
            down = await create_job(
                jobs, _at(time.time() + 3, "one down"), default_tz="UTC", now=time.time()
            )
            await tg.wait_for("sendMessage", 2, timeout=40)
            await one.start()  # back: both jobs are done, neither fires again
            await one.wait_ready()
            for job in (both, down):
                await until(lambda j=job: _settled(store, j.id), timeout=30)
                runs = await store.cron_runs(job.id)
                assert [r.status for r in runs] == ["delivered"], runs
        finally:
            await store.close()
        assert await one.stop() == 0 and await two.stop() == 0
    assert sorted(tg.texts()) == ["cron says: both up", "cron says: one down"]


async def test_a_killed_polling_leader_is_replaced_within_30_seconds(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, pg_url: str
) -> None:
    model.default = lambda body: Reply.text("echo: " + last_user_text(body))
    one = Instance.configure(tmp_path / "one", model, tg, pg_url, "polling")
    two = Instance.configure(tmp_path / "two", model, tg, pg_url, "polling")
    async with instances(one, two):
        await one.start()
        await one.wait_ready()
        await two.start()
        await two.wait_ready()
        assert "this instance receives now" in one.log
        assert "this instance receives now" not in two.log  # standby
        await until(lambda: _status_shows(two, "telegram (leader)", "telegram (standby)"), 30)
        tg.dm("before", user_id=OWNER)
        await tg.wait_for("sendMessage", 1, timeout=30)
        one.kill()
        await one.proc.wait()  # type: ignore[union-attr]
        tg.dm("after", user_id=OWNER)
        await eventually(lambda: "this instance receives now" in two.log, timeout=30)
        await tg.wait_for("sendMessage", 2, timeout=30)
        assert await two.stop() == 0
    assert tg.texts() == ["echo: before", "echo: after"]


async def test_each_heartbeat_tick_runs_on_one_instance_and_goes_on_when_one_dies(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, pg_url: str
) -> None:
    every = 2.0
    beats: list[float] = []  # when each heartbeat reached the model

    def reply(body: dict[str, Any]) -> Reply:
        if "[Heartbeat]" in last_user_text(body):
            beats.append(time.time())
            return Reply.text(f"beat {len(beats)}")
        return Reply.text("not a heartbeat")

    model.default = reply
    homes = [tmp_path / "one", tmp_path / "two"]
    for home in homes:  # the same workspace content on both, a checklist with a task
        (home / "workspace").mkdir(parents=True)
        (home / "workspace" / "HEARTBEAT.md").write_text("- Say how the day goes.\n")
    one, two = (Instance.configure(h, model, tg, pg_url, "webhook", f"{every:g}s") for h in homes)

    async with instances(one, two):
        await one.start()
        await two.start()
        await one.wait_ready()
        await two.wait_ready()
        await eventually(lambda: len(beats) >= 6, timeout=40)
        both_up = len(beats)
        one.kill()
        await one.proc.wait()  # type: ignore[union-attr]
        await eventually(lambda: len(beats) >= both_up + 3, timeout=30)  # the other goes on
        assert await two.stop() == 0, two.log[-3000:]
    # Both instances tick at the same moments; each tick ran on one of them: as many beats as
    # intervals went by (twice as many if both had run every tick), give or take two: two
    # daemons starting at once on a small machine can hold their first tick's model call
    # past the next tick, so the first two beats may arrive together.
    together = beats[:both_up]
    assert len(together) <= (together[-1] - together[0]) / every + 3, together
    # Each answer went out once (a tick whose instance was killed before it sent is lost).
    sent = tg.texts()
    assert len(sent) == len(set(sent)) >= len(beats) - 1, (sent, len(beats))
    assert set(sent) <= {f"beat {n}" for n in range(1, len(beats) + 1)}


def _at(when: float, text: str) -> CronRequest:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when))
    return CronRequest("at", stamp, text, tz="UTC", deliver_to="owner", name=text)


async def _settled(store: Any, job_id: str) -> bool:
    job = await store.cron_get(job_id)
    return job is not None and not job.enabled


async def test_stop_sent_to_one_instance_stops_the_run_on_the_other(
    tmp_path: Path, model: FakeAnthropic, pg_url: str
) -> None:
    gate = asyncio.Event()
    model.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    settings = {
        "channels.telegram.dm_policy": "open",
        "channels.telegram.allow_from": ["*"],
        "channels.telegram.mode": "webhook",  # both instances receive
        "channels.telegram.webhook_url": "https://bot.example/hook",
        "channels.telegram.webhook_secret": SECRET,
        "store.url": pg_url,
        "store.lease": "3s",
    }
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    first, second = MemoryChannel("telegram"), MemoryChannel("telegram")
    async with (
        running_daemon(tmp_path / "one", model, {"telegram": first}, settings) as one,
        running_daemon(tmp_path / "two", model, {"telegram": second}, settings),
    ):
        assert one.gateway is not None
        await first.say("a long question")
        await model.wait_requests(1, timeout=30)
        assert one.gateway.status()["active_runs"] == 1
        # the same DM, its /stop landing on the other instance
        await second.say("/stop")
        assert await second.wait_sent(1, timeout=30) == ["Stopped."]
        await eventually(lambda: one.gateway.status()["active_runs"] == 0, timeout=30)  # type: ignore[union-attr]
        await second.say("/stop")
        assert await second.wait_sent(2, timeout=30) == ["Stopped.", "Nothing to stop."]
        gate.set()
    assert not any(text.startswith("echo:") for text in first.texts())


async def _status_shows(instance: Instance, *fragments: str) -> bool:
    """`perch status` (of any instance: it lists them all) shows every fragment."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.operator.cli", "status", "--config", str(instance.home / "config.yaml"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=instance.home,
        env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"},
    )  # fmt: skip
    out, _ = await proc.communicate()
    lines = [line for line in out.decode().splitlines() if line.startswith("  instance ")]
    return len(lines) == 2 and all(any(f in line for line in lines) for f in fragments)
