"""Bounded polling for state that no event announces (a library's internals, the OS).

Prefer waiting on an event or a fake's condition; use `eventually` only where nothing can
signal, and always with a timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Return once `condition()` holds; fail the test if it does not within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():  # noqa: ASYNC110 (nothing to wait on but the state)
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"condition not met within {timeout} s") from None
