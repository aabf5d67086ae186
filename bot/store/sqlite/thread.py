"""One sqlite3 connection on one thread of its own: the SQLite store's only way to its file.

`await SQLiteThread.open(path)` starts the thread, which connects (autocommit) and then runs
the functions it is handed, one at a time, in order. `await db.run(fn)` calls `fn(conn)` there
as one hand-off; `transaction(work)` wraps `work` in BEGIN IMMEDIATE .. COMMIT (ROLLBACK if it
or the COMMIT raises), still one hand-off, so writers never interleave. A caller cancelled while
its function runs does not stop it: the function finishes (commits or rolls back) and its result
is dropped; a function whose caller was cancelled before its turn is skipped. `close()` lets the
queued work finish, closes the connection on the thread and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

THREAD_NAME = "perch-sqlite"

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


def _serve(path: str, jobs: _Queue, ready: Future[None]) -> None:
    """The thread: connect, answer `ready`, run jobs until `close()` sends its future, then
    close the connection and answer that future."""
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except BaseException as exc:
        ready.set_exception(exc)
        return
    ready.set_result(None)
    while not isinstance(job := jobs.get(), Future):
        work, future, loop = job
        # Only a read of the future's state; the loop alone changes it. Read just before
        # the caller is cancelled, the work runs and its answer is dropped.
        if future.cancelled():  # its caller was cancelled before its turn: skipped
            continue
        try:
            result = work(conn)
        except BaseException as exc:
            answer: Callable[[asyncio.Future[Any], Any], None] = _fail
            result = exc
        else:
            answer = _answer
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
    """A connection owned by one thread; every use is a function run there."""

    def __init__(self, path: str, jobs: _Queue, thread: threading.Thread) -> None:
        self.path = path
        self._jobs = jobs
        self._thread = thread
        self._stopped: Future[None] | None = None

    @classmethod
    async def open(cls, path: str) -> SQLiteThread:
        """Connect on a new thread; sqlite3's own error if the file cannot be opened (the
        thread has ended by then)."""
        jobs: _Queue = SimpleQueue()
        ready: Future[None] = Future()
        # A daemon thread: a store left open does not keep the process from exiting (SQLite
        # rolls back an unfinished transaction at the next open).
        thread = threading.Thread(
            target=_serve, args=(path, jobs, ready), name=THREAD_NAME, daemon=True
        )
        thread.start()
        try:
            await asyncio.wrap_future(ready)
        except asyncio.CancelledError:
            jobs.put(Future())  # the thread closes the connection it is making, and ends
            raise
        except BaseException:
            thread.join()  # it could not connect and has returned
            raise
        return cls(path, jobs, thread)

    async def run(self, work: Work[T]) -> T:
        """`work(conn)` on the database thread, as one hand-off. `work` should only run SQL:
        it holds up every other caller while it runs."""
        if self._stopped is not None:
            raise sqlite3.ProgrammingError(f"{self.path}: the database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((work, future, loop))
        return await future

    async def transaction(self, work: Work[T]) -> T:
        """`work(conn)` inside BEGIN IMMEDIATE .. COMMIT (see `in_transaction`), one hand-off."""
        return await self.run(partial(in_transaction, work=work))

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self.run(partial(_fetchall, sql, params))

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Changed:
        """One statement in autocommit mode (a transaction of its own)."""
        return await self.run(partial(_execute, sql, params))

    async def close(self) -> None:
        """Finish the queued work, close the connection and end the thread. Idempotent; if
        the caller is cancelled, the thread still closes and ends on its own."""
        if self._stopped is None:
            self._stopped = Future()
            self._jobs.put(self._stopped)  # after the work queued before it
        await asyncio.shield(asyncio.wrap_future(self._stopped))
        self._thread.join()  # the connection is closed: the thread returns at once
