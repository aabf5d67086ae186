"""A daemon that runs for months forgets closed inbox rows older than a week while it runs,
not only when it starts (the soak benchmark of issue 40 found every row kept until the
next restart: the database grew by one inbox row a message for as long as it ran)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.waiting import eventually

WEEK_AND_A_DAY = 8 * 86400.0


async def test_old_closed_inbox_rows_are_forgotten_while_the_daemon_runs(tmp_path: Path) -> None:
    chan = MemoryChannel("console", account="local")
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"console": chan}, {"store.lease": "1s"}) as daemon,
    ):
        store: Store = daemon.store  # type: ignore[assignment]
        assert daemon.parts is not None
        old = await store.inbox_add(
            "console", "local", "c", "m-1", {}, received_at=time.time() - WEEK_AND_A_DAY
        )
        assert old is not None
        await store.inbox_close([old])
        assert await store.inbox_add("console", "local", "c", "m-1", {}) is None  # remembered
        daemon.parts.recovery.prune_every = 0  # a day has passed since the start's pruning
        database = daemon.config.db_path

        def forgotten() -> bool:
            with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
                return db.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0

        await eventually(forgotten, timeout=20)  # a beat comes every lease / 3
        assert await store.inbox_add("console", "local", "c", "m-1", {}) is not None
