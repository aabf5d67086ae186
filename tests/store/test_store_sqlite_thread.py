"""The SQLite store's own database thread (`bot.store.sqlite.thread.SQLiteThread`).

One connection on one thread: work runs there as one hand-off; a transaction that raises (or
whose COMMIT fails) is rolled back; a caller cancelled mid-work leaves the work to finish and
the thread free, one cancelled before its turn is skipped; `close()` finishes the queued work
and joins the thread. Quick work runs in place when the thread is idle, waits its turn when
it is not, and goes to the thread when another process holds the file's lock; checkpoints
run on the thread. The store built on it leaves no thread behind, opened or not.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agents.model import Message, Usage
from bot.store.sqlite.store import SQLiteStore
from bot.store.sqlite.thread import (
    AUTOCHECKPOINT_PAGES,
    BUSY_TIMEOUT_MS,
    CHECKPOINT_EVERY,
    THREAD_NAME,
    SQLiteThread,
)
from tests.waiting import eventually


def database_threads() -> int:
    return sum(t.name == THREAD_NAME for t in threading.enumerate())


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SQLiteThread]:
    opened = await SQLiteThread.open(str(tmp_path / "t.db"))
    await opened.execute("CREATE TABLE t (name TEXT PRIMARY KEY)")
    try:
        yield opened
    finally:
        await opened.close()


async def names(db: SQLiteThread) -> list[str]:
    return [r[0] for r in await db.fetchall("SELECT name FROM t ORDER BY name")]


def insert(name: str) -> Callable[[sqlite3.Connection], None]:
    def work(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (name) VALUES (?)", (name,))

    return work


def held(name: str, started: threading.Event, release: threading.Event) -> Callable[..., str]:
    """Work that inserts `name`, says it started, and waits (bounded) to be released."""

    def work(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (name) VALUES (?)", (name,))
        started.set()
        assert release.wait(10), "the test never released the held work"
        return name

    return work


async def transaction_open(db: SQLiteThread) -> bool:
    return await db.run(lambda conn: conn.in_transaction)


# -- errors and rollback -----------------------------------------------------------------


async def test_work_that_raises_is_rolled_back_and_its_error_reaches_the_caller(
    db: SQLiteThread,
) -> None:
    def half_then_fail(conn: sqlite3.Connection) -> None:
        insert("half")(conn)
        raise ValueError("the work failed")

    with pytest.raises(ValueError, match="the work failed"):
        await db.transaction(half_then_fail)
    assert not await transaction_open(db)
    assert await names(db) == []
    await db.transaction(insert("next"))  # the thread and the connection still work
    assert await names(db) == ["next"]


async def test_sqlite_errors_reach_the_caller_as_sqlite3_raised_them(db: SQLiteThread) -> None:
    await db.execute("INSERT INTO t (name) VALUES ('a')")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        await db.transaction(insert("a"))
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        await db.fetchall("SELEC name FROM t")
    assert not await transaction_open(db)
    assert await names(db) == ["a"]


async def test_a_constraint_that_fails_at_commit_rolls_the_transaction_back(
    db: SQLiteThread,
) -> None:
    await db.execute("PRAGMA foreign_keys=ON")
    await db.execute(
        "CREATE TABLE child (parent TEXT REFERENCES t(name) DEFERRABLE INITIALLY DEFERRED)"
    )

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO child (parent) VALUES ('nobody')")  # checked at COMMIT

    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        await db.transaction(orphan)
    assert not await transaction_open(db)  # not left open by the failed COMMIT
    assert await db.fetchall("SELECT * FROM child") == []
    await db.transaction(insert("after"))
    assert await names(db) == ["after"]


# -- cancellation ------------------------------------------------------------------------


async def test_a_caller_cancelled_mid_transaction_leaves_it_whole_and_the_thread_free(
    db: SQLiteThread,
) -> None:
    started, release = threading.Event(), threading.Event()
    running = asyncio.create_task(db.transaction(held("running", started, release)))
    assert await asyncio.to_thread(started.wait, 10)
    queued = asyncio.create_task(db.transaction(insert("queued")))
    await asyncio.sleep(0)  # one step: `queued` hands its work to the thread and waits
    running.cancel()
    queued.cancel()
    # The callers are cancelled at once, while the held work still runs on the thread.
    for task in (running, queued):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not release.is_set()
    release.set()
    # The running work finished and committed; the queued one was skipped.
    assert await names(db) == ["running"]
    assert not await transaction_open(db)
    await db.transaction(insert("later"))
    assert await names(db) == ["later", "running"]


async def test_a_store_whose_save_is_cancelled_keeps_whole_runs_and_keeps_working(
    tmp_path: Path,
) -> None:
    path = tmp_path / "perch.db"
    store = await SQLiteStore.open(path)
    other = sqlite3.connect(path, isolation_level=None, timeout=10)  # another process, say
    try:
        session = await store.session("agent:main:k")
        run: list[Message] = [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        ]
        usage = Usage(input_tokens=10, output_tokens=5)
        other.execute("BEGIN IMMEDIATE")  # holds the write lock: the save has to wait
        saving = asyncio.create_task(store.save_run(session.id, session.key, run, usage=usage))
        await asyncio.sleep(0)  # one step: the save is handed to the database thread
        saving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await saving
        other.execute("COMMIT")
        await store.save_run(session.id, session.key, run, usage=usage)
        # Whatever became of the cancelled save, it is whole or absent, never half.
        saved = await store.messages(session.id)
        assert saved in (run, run + run)
        totals = await store.find_session(session.key)
        assert totals is not None
        assert totals.input_tokens == 10 * len(saved) // 2
        assert (await store.usage_since(0)).input_tokens == totals.input_tokens
        other.execute("BEGIN IMMEDIATE")  # the store holds no transaction open
        other.execute("ROLLBACK")
        await store.check_writable()
    finally:
        other.close()
        await store.close()


# -- quick work --------------------------------------------------------------------------


def where(conn: sqlite3.Connection) -> str:
    return threading.current_thread().name


async def test_quick_work_runs_in_place_when_the_thread_is_idle(db: SQLiteThread) -> None:
    assert await db.run(where, quick=True) == threading.current_thread().name
    assert await db.run(where) == THREAD_NAME
    await db.transaction(insert("quick"), quick=True)
    assert await db.fetchall("SELECT name FROM t", quick=True) == [("quick",)]


async def test_quick_work_waits_its_turn_behind_work_on_the_thread(db: SQLiteThread) -> None:
    started, release = threading.Event(), threading.Event()
    running = asyncio.create_task(db.transaction(held("first", started, release)))
    assert await asyncio.to_thread(started.wait, 10)
    quick = asyncio.create_task(db.transaction(insert("second"), quick=True))
    for _ in range(3):
        await asyncio.sleep(0)  # steps of the loop: run in place, it would be done by now
    assert not quick.done()
    release.set()
    await asyncio.gather(running, quick)
    order = await db.fetchall("SELECT name FROM t ORDER BY rowid")
    assert order == [("first",), ("second",)]  # in the order they were handed over


async def test_quick_work_that_finds_the_file_locked_waits_on_the_thread(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "perch.db")
    other = sqlite3.connect(tmp_path / "perch.db", isolation_level=None, timeout=10)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process writes: the file is locked
        adding = asyncio.create_task(store.inbox_add("telegram", "", "1", "m1", {"text": "hi"}))
        for _ in range(3):
            await asyncio.sleep(0)  # the loop is not held up: it goes on while the add waits
        assert not adding.done()
        other.execute("COMMIT")
        assert await asyncio.wait_for(adding, 10) is not None
        assert [r.message_id for r in await store.inbox_claim()] == ["m1"]
        # The connection waits for other writers again as long as it did before.
        assert await store._db.fetchone("PRAGMA busy_timeout") == (BUSY_TIMEOUT_MS,)
    finally:
        other.close()
        await store.close()


async def test_the_thread_checkpoints_the_log_so_it_stays_small(tmp_path: Path) -> None:
    path = tmp_path / "perch.db"
    wal = path.with_name(path.name + "-wal")
    store = await SQLiteStore.open(path)
    try:
        autocheckpoint = "PRAGMA wal_autocheckpoint"
        assert await store._db.fetchone(autocheckpoint, quick=True) == (0,)  # not in place
        assert await store._db.fetchone(autocheckpoint) == (AUTOCHECKPOINT_PAGES,)  # as before
        text = "x" * 3000  # about a page a message
        sizes = []
        for half in range(2):
            for n in range(CHECKPOINT_EVERY * 8):
                await store.inbox_add("telegram", "", "1", f"m{half}-{n}", {"text": text})
            sizes.append(wal.stat().st_size)
        # Unchecked, the log holds every page written: twice as much after twice the writes.
        assert sizes[1] <= sizes[0] * 1.25, sizes
    finally:
        await store.close()


# -- closing -----------------------------------------------------------------------------


async def test_close_finishes_the_queued_work_then_joins_the_thread(tmp_path: Path) -> None:
    before = database_threads()
    db = await SQLiteThread.open(str(tmp_path / "t.db"))
    assert database_threads() == before + 1
    await db.execute("CREATE TABLE t (name TEXT PRIMARY KEY)")
    writes = [asyncio.create_task(db.transaction(insert(f"n{i}"))) for i in range(20)]
    await asyncio.sleep(0)  # one step: every write is handed to the thread
    await db.close()
    assert database_threads() == before  # joined, not merely asked to stop
    assert await asyncio.gather(*writes) == [None] * 20
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await db.fetchall("SELECT 1")
    await db.close()  # a second close is harmless
    reread = sqlite3.connect(tmp_path / "t.db")
    try:
        assert reread.execute("SELECT count(*) FROM t").fetchone()[0] == 20
    finally:
        reread.close()


async def test_a_cancelled_close_still_closes_and_ends_the_thread(tmp_path: Path) -> None:
    before = database_threads()
    db = await SQLiteThread.open(str(tmp_path / "t.db"))
    await db.execute("CREATE TABLE t (name TEXT PRIMARY KEY)")
    started, release = threading.Event(), threading.Event()
    busy = asyncio.create_task(db.transaction(held("last", started, release)))
    assert await asyncio.to_thread(started.wait, 10)
    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0)  # one step: the close is asked for
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    release.set()
    assert await busy == "last"
    await eventually(lambda: database_threads() == before)


async def test_the_store_leaves_no_thread_behind_after_close(tmp_path: Path) -> None:
    before = database_threads()
    store = await SQLiteStore.open(tmp_path / "perch.db")
    await store.hold_instance()
    await store.session("agent:main:k")
    await store.close()
    assert database_threads() == before
    again = await SQLiteStore.open(tmp_path / "perch.db")  # the instance lock was let go
    try:
        await again.hold_instance()
        assert await again.find_session("agent:main:k") is not None
    finally:
        await again.close()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda p: p.mkdir(), sqlite3.OperationalError),  # a folder where the file should be
        (lambda p: p.write_bytes(b"not a database, " * 512), sqlite3.DatabaseError),
    ],
    ids=["folder", "not-a-database"],
)
async def test_a_store_that_cannot_open_raises_sqlite3s_error_and_leaves_no_thread(
    tmp_path: Path, make: Callable[[Path], object], error: type[Exception]
) -> None:
    path = tmp_path / "perch.db"
    make(path)
    before = database_threads()
    with pytest.raises(error):
        await SQLiteStore.open(path)
    assert database_threads() == before


async def test_an_in_memory_store_works_writes_no_file_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = database_threads()
    store = await SQLiteStore.open(":memory:")
    hello: Message = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    session = await store.session("agent:main:k")
    await store.save_run(session.id, session.key, [hello], usage=Usage(input_tokens=3))
    assert await store.recent_messages(session.id, 10) == ([hello], 1)
    assert await store.schema_version() == store.latest_schema
    await store.close()
    assert database_threads() == before
    assert os.listdir(tmp_path) == []  # nothing was written to a file
