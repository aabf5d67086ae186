"""A rolling upgrade: two `perch run` instances of the previous release on one PostgreSQL,
upgraded one at a time to this tree while DMs flow; nothing lost, nothing answered twice.

The previous release is the commit CHANGELOG.md names on its second `Commit:` line (the
newest is this release, not yet cut), taken out of the repository with `git archive`; it runs
on this venv's libraries (the release's dependencies are a subset of this tree's) with its
own code first on `PYTHONPATH`. Without git or that commit (a shallow clone) the test is
skipped, saying so; without PostgreSQL binaries, too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest
import yaml

from bot.store.postgres.base import MIGRATIONS
from tests.cluster.test_multi_instance import (
    Instance,
    _nothing_pending,
    deliver,
    dm_update,
    instances,
    until,
)
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.telegram import FakeTelegram
from tests.mcp_servers.running import REPO

pytestmark = pytest.mark.timeout(240)

PACE = 0.1  # seconds between two DMs
GRACE = "20s"  # the shipped shutdown grace: runs under way finish before an instance stops
_COMMIT = re.compile(r"^Commit: ([0-9a-f]{40})$", re.MULTILINE)


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def previous_release() -> str:
    """The commit of the release before this one, as CHANGELOG.md names it."""
    commits = _COMMIT.findall((REPO / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert commits, "CHANGELOG.md names no release commit"
    return str(commits[0])


def checkout_of(commit: str, into: Path) -> Path:
    """The tree of `commit`, extracted from the repository into `into`."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the previous release cannot be taken out")
    known = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    if known.returncode != 0:
        pytest.skip(f"commit {commit[:12]} is not in this clone (a shallow one?)")
    archive = into.with_suffix(".tar")
    subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", f"--output={archive}", commit],
        check=True,
        timeout=120,
    )
    into.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into


class ReleaseInstance(Instance):
    """An `Instance` that runs the code at `code` (None: this tree)."""

    code: Path | None = None

    async def start(self) -> None:
        self.starts += 1
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}
        if self.code is not None:
            env["PYTHONPATH"] = str(self.code)
        else:
            env.pop("PYTHONPATH", None)
        log = (self.home / "perch.log").open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.operator.cli", "run", "--config", str(self.home / "config.yaml"),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=self.home,
        )  # fmt: skip
        log.close()


def schema_of(code: Path) -> int:
    """The PostgreSQL schema the code at `code` migrates to (proves which code runs)."""
    probe = "import bot.store.postgres.base as b; print(len(b.MIGRATIONS))"
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=code, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


async def schema_at(url: str) -> int:
    """The schema version the database is at, read without migrating anything."""
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT version FROM perch_schema"))
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def flowing(
    http: aiohttp.ClientSession, ports: list[int], users: list[int]
) -> AsyncIterator[list[str]]:
    """DMs posted without pause (each user's in turn, alternately to both ports, to the
    other when one refuses) until the block ends; yields the texts sent so far."""
    sent: list[str] = []
    enough = asyncio.Event()

    async def post() -> None:
        n = 0
        while not enough.is_set():
            user = users[n % len(users)]
            text = f"m{n} from {user}"
            await deliver(http, ports[n % 2 :] + ports[: n % 2], dm_update(user, text))
            sent.append(text)
            n += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(enough.wait(), PACE)

    task = asyncio.create_task(post())
    try:
        yield sent
    finally:
        enough.set()  # the post under way completes: what was taken is counted
        await task


async def test_a_pair_upgraded_one_at_a_time_while_messages_flow_loses_and_repeats_nothing(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, pg_url: str
) -> None:
    old = checkout_of(previous_release(), tmp_path / "previous")
    old_schema = schema_of(old)
    assert old_schema < len(MIGRATIONS), "the previous release already has this schema"
    model.default = lambda body: Reply.text("echo: " + last_user_text(body), delay=0.05)
    one = ReleaseInstance.configure(tmp_path / "one", model, tg, pg_url, "webhook")
    two = ReleaseInstance.configure(tmp_path / "two", model, tg, pg_url, "webhook")
    one.code = two.code = old
    for instance in (one, two):
        config = instance.home / "config.yaml"
        data = yaml.safe_load(config.read_text())
        data["gateway"]["shutdown_grace"] = GRACE
        config.write_text(yaml.safe_dump(data))
    users = [2000 + u for u in range(12)]
    async with instances(one, two), aiohttp.ClientSession() as http:
        await asyncio.gather(one.start(), two.start())
        await asyncio.gather(one.wait_ready(), two.wait_ready())
        assert await schema_at(pg_url) == old_schema  # (open_store would migrate it)
        async with flowing(http, [one.port, two.port], users) as sent:
            await tg.wait_for("sendMessage", 10, timeout=60)
            for instance in (one, two):  # one at a time: the other takes the traffic
                assert await instance.stop() == 0, instance.log[-3000:]
                instance.code = None  # this tree
                await instance.start()
                await instance.wait_ready()
                answered = len(tg.texts())
                await tg.wait_for("sendMessage", answered + 10, timeout=60)
        await tg.wait_for("sendMessage", len(sent), timeout=90)
        await until(lambda: _nothing_pending(pg_url), timeout=30)
        assert await one.stop() == 0, one.log[-3000:]
        assert await two.stop() == 0, two.log[-3000:]
    answers = Counter(tg.texts())
    assert answers == Counter(f"echo: {t}" for t in sent), [
        (t, c) for t, c in answers.items() if c != 1
    ]
    assert await schema_at(pg_url) == len(MIGRATIONS)
