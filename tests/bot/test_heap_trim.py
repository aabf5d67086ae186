"""Freed heap memory goes back to the system (`bot/kernel/heap.py`): memory a daemon freed in
the middle of its heap (where glibc keeps it by itself) leaves its RSS after a trim; the beat
trims at most once per interval, off the event loop."""

from __future__ import annotations

import asyncio
import ctypes
from pathlib import Path

import pytest

from bot.kernel.heap import HeapTrim


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except AttributeError:
        return False
    return True


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's (this libc has none)")
def test_memory_freed_inside_the_heap_leaves_the_rss_after_a_trim() -> None:
    heap = HeapTrim()
    assert heap.available
    heap.trim_now()
    kept = [bytearray(2000) for _ in range(60_000)]  # ~120 MiB in malloc's own heap
    for block in kept:
        block[::500] = b"\x01" * len(block[::500])  # touched, so resident
    del kept[:-1]  # all freed but the last block: the heap's top stays in use
    before = _rss_mib()
    assert heap.trim_now()
    after = _rss_mib()
    assert before - after > 60, (before, after)
    assert heap.trims == 2


async def test_the_beat_trims_at_most_once_per_interval() -> None:
    heap = HeapTrim(every=3600)
    await heap.tick()
    assert heap.trims == 0  # the interval has not passed since the daemon began
    heap.every = 0
    await asyncio.gather(heap.tick(), heap.tick())
    await heap.tick()
    assert heap.trims == (3 if heap.available else 0)
