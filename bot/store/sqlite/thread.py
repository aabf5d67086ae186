"""One sqlite3 connection, served by one thread of its own: the SQLite store's only way to
its file.

`await SQLiteThread.open(path)` starts the thread, which connects (autocommit) and then runs
the functions it is handed, one at a time, in order. `await db.run(fn)` calls `fn(conn)` there
as one hand-off; `transaction(work)` wraps `work` in BEGIN IMMEDIATE .. COMMIT (ROLLBACK if it
or the COMMIT raises), still one hand-off, so writers never interleave. A caller cancelled while
its function runs does not stop it: the function finishes (commits or rolls back) and its result
is dropped; a function whose caller was cancelled before its turn is skipped. `close()` lets the
queued work finish, closes the connection on the thread and joins the thread.

**Quick work runs in place.** A hand-off costs two thread wake-ups and, on a busy loop, a
wait for the GIL: 0.1-0.4 ms, more than the small statements of a turn take themselves
(`bench/README.md`, issue 40). So a caller may mark its work `quick` (a point read or write
of a turn: an inbox row, a session's recent messages, a run's save, a search): when the
thread has nothing queued or running, quick work runs at once on the caller's thread, on the
same connection, under the lock the thread holds while it works, so the order of the work
and "one user of the connection at a time" still hold. It never waits for another process:
at rest the connection's busy timeout is 0 (the thread's work alone waits), and quick work
that finds the file locked (another process writing) goes to the thread, which waits as long
as `BUSY_TIMEOUT_MS`. Whatever is not marked quick (a backup, a rebuild, a dump, a
migration) always runs on the thread.

**Checkpoints run on the thread.** SQLite copies the write-ahead log into the database (and
fsyncs it) inside whichever commit crosses `AUTOCHECKPOINT_PAGES`. The thread's work still
does; quick work in place never does (the automatic checkpoint is on for the thread's work
alone), and every `CHECKPOINT_EVERY` quick uses a checkpoint is handed to the thread like
any work: whatever comes meanwhile waits for it, as it waited for the commit that
checkpointed before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

THREAD_NAME = "perch-sqlite"
BUSY_TIMEOUT_MS = 5000  # how long work on the thread waits for another process's write lock
CHECKPOINT_EVERY = 200  # quick uses of the connection between two checkpoints on the thread
AUTOCHECKPOINT_PAGES = 1000  # SQLite's own: a commit on the thread past this checkpoints
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6

Work = Callable[[sqlite3.Connection], T]
_Job = tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]
_Queue = SimpleQueue[_Job | Future[None]]  # a bare Future: close() asks the thread to end


def _answer(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # its caller was cancelled meanwhile: the result is dropped
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


@dataclass(frozen=True, slots=True)
class Changed:
    """What one write statement did: rows changed, and the last inserted rowid."""

    rowcount: int
    lastrowid: int | None


@dataclass(slots=True)
class _Turns:
    """Who may use the connection: `using` is held by whoever works on it (the thread, or
    quick work in place); `queued` counts the jobs handed to the thread and not finished."""

    using: threading.Lock = field(default_factory=threading.Lock)
    counting: threading.Lock = field(default_factory=threading.Lock)
    queued: int = 0

    def add(self) -> None:
        with self.counting:
            self.queued += 1

    def done(self) -> None:
        with self.counting:
            self.queued -= 1


def in_transaction(conn: sqlite3.Connection, work: Work[T]) -> T:
    """On the database thread: `work(conn)` between BEGIN IMMEDIATE and COMMIT. If `work` or
    the COMMIT raises (a deferred constraint fails at COMMIT), the transaction is rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # some errors (a full disk) have rolled it back already
            conn.execute("ROLLBACK")
        raise
    return result


def _fetchall(sql: str, params: Sequence[Any], conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _execute(sql: str, params: Sequence[Any], conn: sqlite3.Connection) -> Changed:
    cur = conn.execute(sql, params)
    return Changed(cur.rowcount, cur.lastrowid)


def _busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock this work needed (it did nothing, and may wait)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _settings(conn: sqlite3.Connection, *, waiting: bool) -> None:
    """The connection as the thread's work uses it (`waiting`: for another process's lock,
    and checkpointing in its commits), or as quick work in place does (neither: how it rests,
    since quick work is the most of it)."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS if waiting else 0}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES if waiting else 0}")


def _checkpoint(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _checked(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("sqlite: the write-ahead log checkpoint failed (%s); tried again later", exc)


def _serve(path: str, jobs: _Queue, ready: Future[sqlite3.Connection], turns: _Turns) -> None:
    """The thread: connect, answer `ready`, run jobs until `close()` sends its future, then
    close the connection and answer that future."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        _settings(conn, waiting=False)
    except BaseException as exc:
        ready.set_exception(exc)
        return
    ready.set_result(conn)
    while not isinstance(job := jobs.get(), Future):
        work, future, loop = job
        with turns.using:
            # Only a read of the future's state; the loop alone changes it. Read just before
            # the caller is cancelled, the work runs and its answer is dropped.
            if future.cancelled():  # its caller was cancelled before its turn: skipped
                turns.done()
                continue
            try:
                _settings(conn, waiting=True)
                result = work(conn)
            except BaseException as exc:
                answer: Callable[[asyncio.Future[Any], Any], None] = _fail
                result = exc
            else:
                answer = _answer
            finally:
                _settings(conn, waiting=False)
            turns.done()
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(answer, future, result)
    job.set_running_or_notify_cancel()
    try:
        conn.close()
    except BaseException as exc:
        job.set_exception(exc)
    else:
        job.set_result(None)


class SQLiteThread:
    """A connection owned by one thread; every use is a function run there, or in place when
    it is quick and the thread is idle."""

    def __init__(
        self,
        path: str,
        jobs: _Queue,
        thread: threading.Thread,
        conn: sqlite3.Connection,
        turns: _Turns,
    ) -> None:
        self.path = path
        self._jobs = jobs
        self._thread = thread
        self._conn = conn
        self._turns = turns
        self._uses = 0
        self._stopped: Future[None] | None = None

    @classmethod
    async def open(cls, path: str) -> SQLiteThread:
        """Connect on a new thread; sqlite3's own error if the file cannot be opened (the
        thread has ended by then)."""
        jobs: _Queue = SimpleQueue()
        ready: Future[sqlite3.Connection] = Future()
        turns = _Turns()
        # A daemon thread: a store left open does not keep the process from exiting (SQLite
        # rolls back an unfinished transaction at the next open).
        thread = threading.Thread(
            target=_serve, args=(path, jobs, ready, turns), name=THREAD_NAME, daemon=True
        )
        thread.start()
        try:
            conn = await asyncio.wrap_future(ready)
        except asyncio.CancelledError:
            jobs.put(Future())  # the thread closes the connection it is making, and ends
            raise
        except BaseException:
            thread.join()  # it could not connect and has returned
            raise
        return cls(path, jobs, thread, conn, turns)

    async def run(self, work: Work[T], *, quick: bool = False) -> T:
        """`work(conn)` on the database thread, as one hand-off; `quick` work in place when
        the thread is idle (see the module's docstring). `work` should only run SQL: it holds
        up every other caller while it runs, and quick work must do nothing before the
        statement that may find the file locked (a single statement, or a transaction)."""
        if self._stopped is not None:
            raise sqlite3.ProgrammingError(f"{self.path}: the database is closed")
        if quick and self._turns.queued == 0 and self._turns.using.acquire(blocking=False):
            try:
                return self._in_place(work)
            except sqlite3.Error as exc:
                if not _busy(exc):
                    raise  # else: another process writes: wait for it on the thread
            finally:
                self._turns.using.release()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._turns.add()
        self._jobs.put((work, future, loop))
        return await future

    def _in_place(self, work: Work[T]) -> T:
        """`work` on the caller's thread: waiting for no other process, checkpointing never
        (the connection's settings at rest, `_settings`)."""
        try:
            return work(self._conn)
        finally:
            self._count_use()

    def _count_use(self) -> None:
        """Every `CHECKPOINT_EVERY` quick uses, a passive checkpoint on the thread."""
        self._uses += 1
        if self._uses % CHECKPOINT_EVERY == 0 and self.path != ":memory:":
            loop = asyncio.get_running_loop()
            checkpoint: asyncio.Future[None] = loop.create_future()
            checkpoint.add_done_callback(_checked)
            self._turns.add()
            self._jobs.put((_checkpoint, checkpoint, loop))

    async def transaction(self, work: Work[T], *, quick: bool = False) -> T:
        """`work(conn)` inside BEGIN IMMEDIATE .. COMMIT (see `in_transaction`), one hand-off."""
        return await self.run(partial(in_transaction, work=work), quick=quick)

    async def fetchall(
        self, sql: str, params: Sequence[Any] = (), *, quick: bool = False
    ) -> list[Any]:
        return await self.run(partial(_fetchall, sql, params), quick=quick)

    async def fetchone(
        self, sql: str, params: Sequence[Any] = (), *, quick: bool = False
    ) -> Any | None:
        rows = await self.fetchall(sql, params, quick=quick)
        return rows[0] if rows else None

    async def execute(
        self, sql: str, params: Sequence[Any] = (), *, quick: bool = False
    ) -> Changed:
        """One statement in autocommit mode (a transaction of its own)."""
        return await self.run(partial(_execute, sql, params), quick=quick)

    async def close(self) -> None:
        """Finish the queued work, close the connection and end the thread. Idempotent; if
        the caller is cancelled, the thread still closes and ends on its own."""
        if self._stopped is None:
            self._stopped = Future()
            self._jobs.put(self._stopped)  # after the work queued before it
        await asyncio.shield(asyncio.wrap_future(self._stopped))
        self._thread.join()  # the connection is closed: the thread returns at once
