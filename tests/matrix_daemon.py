"""The whole daemon on the Matrix channel against the session's Synapse, for the Matrix tests.

Fixtures `model` (the fake Anthropic), `bot` and `alice` (fresh users on the session's
Synapse), `matrix_settings(...)` (a `channels.matrix` section for them) and `daemon(...)`
(a running `Daemon` whose Matrix channel is up, stopped on exit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.daemon import Daemon
from tests.fakes.anthropic import FakeAnthropic
from tests.harness import make_config
from tests.matrix_server import MatrixUser, SynapseServer, register, synapse_server

__all__ = ["synapse_server"]  # the session's Synapse, a fixture


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
def bot(synapse_server: SynapseServer) -> MatrixUser:
    return register(synapse_server, "perch", "Perch")


@pytest.fixture
def alice(synapse_server: SynapseServer) -> MatrixUser:
    return register(synapse_server, "alice", "Alice")


def matrix_settings(
    server: SynapseServer, bot: MatrixUser, allowed: list[str], **options: Any
) -> dict[str, Any]:
    return {
        "channels.matrix": {
            "enabled": True,
            "homeserver": server.url,
            "user_id": bot.user_id,
            "access_token": bot.access_token,
            "allow_from": allowed,
            "dm_policy": "allowlist",
            "stream_interval": 0.2,
            "typing_interval": 1.0,
            "sync_timeout": 2.0,
            **options,
        }
    }


@asynccontextmanager
async def daemon(
    tmp_path: Path,
    model: FakeAnthropic,
    server: SynapseServer,
    bot: MatrixUser,
    allowed: list[str],
    extra: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[Daemon]:
    settings = {**matrix_settings(server, bot, allowed, **options), **(extra or {})}
    running = Daemon(make_config(tmp_path, model.base_url, settings))
    await running.start()
    try:
        assert running.channels["matrix"].status().up, running.channels["matrix"].status()
        yield running
    finally:
        await running.stop()
