"""The browser's own cgroup: Chromium and everything it forks under `agent.exec`'s limits.

Playwright starts Chromium detached, in a session and process group of its own; this adds a
cgroup where the host lets Perch manage one (`CgroupHome`: a delegated cgroup v2, or v1 as
root). `BrowserJail.launching(driver)` wraps one browser launch: it makes a cgroup with exec's
memory and process limits (each at most half of what the daemon's own cgroup has left), moves
Playwright's driver in for the launch only and back out when it returns. Chromium is thus born
inside, so every zygote, renderer and helper it forks is counted and none is left out (moving
a running tree instead would race with its forks). When the browser closes, `close()` kills
what is left of it and removes the cgroup; `limit_counts()` tells why a page crashed. Without a
cgroup home nothing changes: the process group stays, and exec's rlimits do not fit Chromium
(its address space reservations are far above any sane RLIMIT_AS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from agents.tools.cgroups import CgroupHome, CommandCgroup

log = logging.getLogger(__name__)


def driver_pids() -> set[int]:
    """This process's children that are Playwright drivers (`node ... run-driver`)."""
    me, found = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat.rpartition(")")[2].split()[1]) != me:
                continue
            words = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if b"run-driver" in words:
            found.add(int(entry.name))
    return found


class BrowserJail:
    """One cgroup per running browser, where `home` offers cgroups; else only a description."""

    def __init__(self, home: CgroupHome | None, memory_bytes: int, processes: int) -> None:
        self.home = home
        self.memory_bytes = memory_bytes
        self.processes = processes
        self.group: CommandCgroup | None = None

    @contextlib.asynccontextmanager
    async def launching(self, driver: int | None) -> AsyncIterator[None]:
        """Around one launch: what Playwright's driver starts meanwhile is born in the cgroup."""
        home = self.home
        if home is None or driver is None:
            yield
            return
        try:
            group = await asyncio.to_thread(home.command, self.processes, self.memory_bytes)
        except OSError as exc:
            log.warning("browser: no cgroup of its own (%s); it runs in its process group", exc)
            yield
            return
        try:
            group.move(driver)
        except OSError as exc:
            log.warning("browser: the driver could not join its cgroup (%s)", exc)
            await asyncio.to_thread(group.close)
            yield
            return
        self.group = group
        try:
            yield
        finally:
            try:
                home.take_back(driver)
            except OSError as exc:
                log.warning("browser: the driver stays in the browser's cgroup (%s)", exc)

    def limit_counts(self) -> tuple[int, int]:
        """How often the browser's memory ran out and a fork was refused (0, 0: no cgroup)."""
        return self.group.limit_counts() if self.group is not None else (0, 0)

    async def close(self) -> None:
        """Kill what is left of the browser and remove its cgroup (after `browser.close()`)."""
        group, self.group = self.group, None
        if group is not None:
            await asyncio.to_thread(group.close)

    def describe(self) -> str:
        if self.home is None:
            return "its own process group (no cgroup to manage here)"
        return (
            f"its own process group and cgroup v{self.home.version} (memory "
            f"{_mib(self.memory_bytes)}, processes {self.processes or 'unlimited'}: "
            "agent.exec's limits)"
        )


def _mib(size: int) -> str:
    return f"{size // 2**20} MiB" if size > 0 else "unlimited"
