"""A whole daemon in-process for tests: real config, store, loop, gateway; fake wires.

`running_daemon(tmp_path, fake, channels, **overrides)` writes a config.yaml into
`tmp_path` (the model pointed at the fake server: Anthropic, or Chat Completions through
`tests.model_backends.OpenAIView`), starts `Daemon` with the given
channels, yields it, and stops it. `overrides` are dotted config keys, e.g.
`{"agent.queue.mode": "steer"}`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from bot.config.load import load_config
from bot.config.schema import Config
from bot.daemon import Daemon
from channels.base import Channel
from tests.fakes.anthropic import FakeAnthropic
from tests.model_backends import OpenAIView, provider_settings


def make_config(tmp_path: Path, base_url: str, overrides: dict[str, Any] | None = None) -> Config:
    data: dict[str, Any] = {
        "agent": {"model": "claude-sonnet-5-5", "workspace": "./workspace"},
        "providers": {"anthropic": {"api_key": "test-key", "base_url": base_url}},
        "store": {"path": "./data/perch.db"},
        "channels": {"console": {"enabled": False}},
        # previews and typing at once: the tests of previews stream fast
        # (tests/bot/test_preview_after.py), the typing tests' models answer in well under 1 s
        "gateway": {"shutdown_grace": "2s", "preview_after": 0, "typing_after": 0},
        "heartbeat": {"every": 0},
    }
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path, {})


@asynccontextmanager
async def running_daemon(
    tmp_path: Path,
    fake: FakeAnthropic | OpenAIView,
    channels: dict[str, Channel],
    overrides: dict[str, Any] | None = None,
) -> AsyncIterator[Daemon]:
    model, providers = provider_settings(fake)
    settings = {"agent.model": model, "providers": providers, **(overrides or {})}
    config = make_config(tmp_path, fake.base_url, settings)
    daemon = Daemon(config, channels=channels)
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()
