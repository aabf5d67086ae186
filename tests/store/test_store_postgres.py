"""Perch on PostgreSQL: the daemon, `perch doctor` and `perch store migrate` with `store.url`.

Each test gets a fresh database on the session's throwaway server (tests/store_backends.py);
without PostgreSQL binaries on the machine they are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import yaml

from bot.config.errors import ConfigError
from bot.operator.cli import main
from bot.operator.doctor import run_checks
from bot.store.open import open_store
from bot.store.postgres.base import INSTANCE_LOCK
from bot.store.postgres.base import MIGRATIONS as PG_MIGRATIONS
from bot.store.rows import InstanceRow
from tests.bot.test_daemon_process import Perch, write_config
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_the_daemon_keeps_its_conversations_in_postgresql(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str
) -> None:
    settings = {**OPEN_DMS, "store.url": pg_url}
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
        await chan.say("my name is Ada")
        assert await chan.wait_sent(1, timeout=30) == ["echo: my name is Ada"]
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
        await chan.say("what is my name?")
        await chan.wait_sent(1, timeout=30)
    texts = [m["content"][-1].get("text") for m in fake.requests[-1]["messages"]]
    assert texts == ["my name is Ada", "echo: my name is Ada", "what is my name?"]
    assert not (tmp_path / "data" / "perch.db").exists()
    store = await open_store(pg_url)
    try:
        assert await store.inbox_pending() == []
        [session] = await store.list_sessions()
        assert await store.count_messages(session.id) == 4
    finally:
        await store.close()


async def test_a_second_daemon_on_the_same_database_joins_it(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str
) -> None:
    webhook = {  # a mode every instance receives in (long polling has one leader)
        "channels.telegram.mode": "webhook",
        "channels.telegram.webhook_url": "https://bot.example/hook",
        "channels.telegram.webhook_secret": "s3cret",
    }
    settings = {**OPEN_DMS, **webhook, "store.url": pg_url}
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    first, second = MemoryChannel("telegram"), MemoryChannel("telegram")
    async with (
        running_daemon(tmp_path / "one", fake, {"telegram": first}, settings) as one,
        running_daemon(tmp_path / "two", fake, {"telegram": second}, settings) as two,
    ):
        assert one.beacon is not None and two.beacon is not None
        assert one.beacon.id != two.beacon.id
        await first.say("to one")
        await second.say("to two", chat_id="other")
        assert await first.wait_sent(1, timeout=30) == ["echo: to one"]
        assert await second.wait_sent(1, timeout=30) == ["echo: to two"]


async def test_doctor_checks_the_connection_and_schema_without_showing_the_password(
    tmp_path: Path, pg_url: str
) -> None:
    with_password = pg_url.replace("postgres@", "postgres:s3cret@")
    config = make_config(tmp_path, "http://127.0.0.1:9", {"store.url": with_password})
    checks = {c.name: c for c in await run_checks(config)}
    database = checks["database"]
    assert database.ok, database.line()
    assert database.detail.endswith(f"writable, schema {len(PG_MIGRATIONS)}")
    assert "s3cret" not in database.line() and "postgres:***@" in database.detail


async def test_doctor_says_what_to_do_when_the_server_is_unreachable(tmp_path: Path) -> None:
    url = "postgresql://perch:s3cret@127.0.0.1:9/perch"  # nothing listens on port 9
    config = make_config(tmp_path, "http://127.0.0.1:9", {"store.url": url})
    checks = {c.name: c for c in await run_checks(config)}
    database = checks["database"]
    assert not database.ok
    assert "cannot connect to PostgreSQL" in database.detail
    assert "store.url" in database.fix
    assert "s3cret" not in database.line()


async def test_store_migrate_copies_the_sqlite_database_once(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("remember the blue door")
        await chan.wait_sent(1, timeout=30)
        config_file = str(tmp_path / "config.yaml")
        # while the daemon runs, the copy refuses (it would miss what is written meanwhile)
        assert (
            await asyncio.to_thread(
                main, ["store", "migrate", "--to", pg_url, "--config", config_file]
            )
            == 1
        )
        assert "stop it before migrating" in capsys.readouterr().err
    code = await asyncio.to_thread(
        main, ["store", "migrate", "--to", pg_url, "--config", config_file]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Copied 1 sessions, 2 messages, 1 inbox" in out and "set store.url" in out
    again = await asyncio.to_thread(
        main, ["store", "migrate", "--to", pg_url, "--config", config_file]
    )
    assert again == 1 and "already holds Perch data" in capsys.readouterr().err
    # the daemon, pointed at PostgreSQL, goes on with the same conversation
    chan = MemoryChannel("telegram")
    settings = {**OPEN_DMS, "store.url": pg_url}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
        await chan.say("which door?")
        await chan.wait_sent(1, timeout=30)
    texts = [m["content"][-1].get("text") for m in fake.requests[-1]["messages"]]
    assert texts == ["remember the blue door", "echo: remember the blue door", "which door?"]


def test_store_migrate_wants_a_postgresql_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_config(tmp_path, "http://127.0.0.1:9")
    assert (
        main(["store", "migrate", "--to", "mysql://x", "--config", str(tmp_path / "config.yaml")])
        == 2
    )
    assert "give a postgresql:// URL" in capsys.readouterr().err


async def test_status_lists_the_live_instances_of_the_shared_database(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = {**OPEN_DMS, "store.url": pg_url}
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings) as daemon:
        assert daemon.beacon is not None
        await daemon.beacon.beat()
        store = await open_store(pg_url)
        try:  # another host's daemon, and one that died a while ago
            now = time.time()
            await store.instance_beat(InstanceRow("x", "far-host", 7, now, now, {}))
            await store.instance_beat(InstanceRow("y", "dead-host", 8, now - 99, now - 99, {}))
        finally:
            await store.close()
        config = str(tmp_path / "config.yaml")
        assert await asyncio.to_thread(main, ["status", "--config", config]) == 0
        out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("  instance ")]
    assert len(lines) == 2, out
    # polling Telegram is received by one instance at a time: this one leads it
    assert f"pid {os.getpid()}" in lines[0] and "channels telegram (leader);" in lines[0]
    assert "far-host pid 7" in lines[1]
    assert "dead-host" not in out
    # a clean stop removes the daemon's row
    store = await open_store(pg_url)
    try:
        assert [i.host for i in await store.instances(0)] == ["dead-host", "far-host"]
    finally:
        await store.close()


# -- `perch run` processes on one PostgreSQL database ---------------------------------------


def pg_config(tmp_path: Path, base_url: str, url: str) -> Path:
    path = write_config(tmp_path, base_url)
    data = yaml.safe_load(path.read_text())
    data["store"] = {"url": url, "lease": "3s"}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.timeout(120)
async def test_sigkill_mid_run_on_postgresql_loses_nothing_and_answers_once(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str
) -> None:
    config = pg_config(tmp_path, fake.base_url, pg_url)
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    perch = await Perch.start(config)
    await perch.say("remember the milk")
    await fake.wait_requests(1, timeout=30)
    perch.proc.kill()
    await perch.proc.wait()

    gate.set()
    perch = await Perch.start(config)  # a new instance: the dead one's lease runs out
    await perch.expect("echo: remember the milk", timeout=40)
    code, err = await perch.finish()
    assert code == 0, err
    assert [last_user_text(r) for r in fake.requests] == ["remember the milk"] * 2
    assert sum("echo: remember the milk" in row for row in perch.screen()) == 1
    store = await open_store(pg_url)
    try:
        assert await store.inbox_pending() == []
        [session] = await store.list_sessions()
        assert [m["role"] for m in await store.messages(session.id)] == ["user", "assistant"]
    finally:
        await store.close()


@pytest.mark.timeout(120)
async def test_a_second_perch_run_on_the_same_postgresql_database_joins(
    tmp_path: Path, fake: FakeAnthropic, pg_url: str
) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    first = await Perch.start(pg_config(tmp_path / "one", fake.base_url, pg_url))
    await first.say("hello")
    await first.expect("echo: hello", timeout=40)
    second = await Perch.start(pg_config(tmp_path / "two", fake.base_url, pg_url))
    await second.say("hi there")
    await second.expect("echo: hi there", timeout=40)
    for perch in (second, first):
        code, err = await perch.finish()
        assert code == 0, err


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("mysql://perch@db/perch", "must start with postgresql://"),
        ("postgresql://perch@db:port/perch", "is not a valid postgresql:// URL"),
        ("postgresql://perch@[db/perch", "is not a valid postgresql:// URL"),
    ],
)
def test_a_bad_store_url_is_a_config_error_naming_the_key(
    tmp_path: Path, url: str, complaint: str
) -> None:
    with pytest.raises(ConfigError) as err:
        make_config(tmp_path, "http://127.0.0.1:9", {"store.url": url})
    assert "store.url" in str(err.value) and complaint in str(err.value)


def test_perch_run_says_in_one_line_when_the_database_server_is_down(tmp_path: Path) -> None:
    url = "postgresql://perch:s3cret@127.0.0.1:9/perch"  # nothing listens on port 9
    make_config(tmp_path, "http://127.0.0.1:9", {"store.url": url})
    config = str(tmp_path / "config.yaml")
    done = subprocess.run(  # a process of its own: `perch run` sets up logging for good
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", config],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("perch: opening the store postgresql://perch:***@127.0.0.1:9/perch")
    assert "failed: cannot connect to PostgreSQL" in last
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr


def test_status_says_when_the_database_server_is_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_config(tmp_path, "http://127.0.0.1:9", {"store.url": "postgresql://p@127.0.0.1:9/p"})
    assert main(["status", "--config", str(tmp_path / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Perch is not running." in out
    assert "database: postgresql://p@127.0.0.1:9/p: cannot connect to PostgreSQL" in out


async def test_a_dropped_leadership_is_taken_again_at_the_next_check(pg_url: str) -> None:
    store = await open_store(pg_url)
    other = await open_store(pg_url)
    admin = await asyncpg.connect(pg_url)
    try:
        assert await store.leadership("channel:telegram")
        # the server drops the lock's connection (as in a restart or a network cut)
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND classid = $1",
            INSTANCE_LOCK,
        )
        assert killed == 1
        assert await store.leadership("channel:telegram")  # free, so taken again
        assert not await other.leadership("channel:telegram")
    finally:
        await admin.close()
        await other.close()
        await store.close()
