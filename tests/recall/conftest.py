"""The recall tests' store: a fresh SQLite database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.open import open_store
from bot.store.roles import Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(tmp_path / "data" / "perch.db")
    try:
        yield opened
    finally:
        await opened.close()
