"""The last log lines in memory, redacted as the log is, for the Logs page and its live feed.

`LogTail` is a logging handler on the root logger from `attach()` to `detach()`: it keeps
the last `capacity` records as formatted lines, each through the same `RedactingFilter` the
daemon's log handlers use (configured secrets and token shapes become `[REDACTED]`), and
wakes the server-sent-event streams waiting for more (`wait_after`). Records may come from
any thread; waiters are woken on their own event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from bot.process.logs import RedactingFilter, Redactor, TextFormatter

CAPACITY = 1000


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int  # 1, 2, ... in arrival order: the SSE event id
    created: float
    level: str
    text: str


class LogTail(logging.Handler):
    """A ring of the last log lines, redacted."""

    def __init__(self, secrets: Iterable[str] = (), capacity: int = CAPACITY) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RedactingFilter(Redactor(secrets)))
        self.setFormatter(TextFormatter())
        self._lines: deque[LogLine] = deque(maxlen=capacity)
        self._seq = 0
        self._guard = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def attach(self) -> None:
        logging.getLogger().addHandler(self)

    def detach(self) -> None:
        logging.getLogger().removeHandler(self)
        for loop, event in list(self._waiters):
            loop.call_soon_threadsafe(event.set)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._guard:
            self._seq += 1
            self._lines.append(LogLine(self._seq, record.created, record.levelname, text))
            waiters = list(self._waiters)
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    @property
    def last_seq(self) -> int:
        """The number of the newest line (0 before the first)."""
        with self._guard:
            return self._seq

    def after(self, seq: int, limit: int = CAPACITY) -> list[LogLine]:
        """Lines after `seq`, oldest first (at most the last `limit`)."""
        with self._guard:
            lines = [line for line in self._lines if line.seq > seq]
        return lines[-limit:]

    def problems(self, limit: int = 10) -> list[LogLine]:
        """The last warnings and errors, newest first."""
        with self._guard:
            found = [line for line in self._lines if line.level in ("WARNING", "ERROR", "CRITICAL")]
        return found[::-1][:limit]

    async def wait_after(self, seq: int, timeout: float) -> list[LogLine]:
        """Lines after `seq`, waiting up to `timeout` seconds for one when there is none."""
        lines = self.after(seq)
        if lines:
            return lines
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._guard:
            self._waiters.add(waiter)
        try:
            lines = self.after(seq)  # one may have come while we registered
            if not lines:
                async with asyncio.timeout(timeout):
                    await waiter[1].wait()
                lines = self.after(seq)
        except TimeoutError:
            return []
        finally:
            with self._guard:
                self._waiters.discard(waiter)
        return lines
