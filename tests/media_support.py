"""Shared pieces of the media tests: a daemon started on its config's own adapters, config
for speech-to-text, reading tool results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.daemon import Daemon
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.harness import make_config
from tests.turn_text import TIME_STAMP, said


async def started(tmp_path: Path, model: FakeAnthropic, overrides: dict[str, Any]) -> Daemon:
    """A daemon on `make_config`'s config with `overrides`, its channels built from it
    (the platforms' real adapters against the test's fakes); stop it after."""
    daemon = Daemon(make_config(tmp_path, model.base_url, overrides))
    await daemon.start()
    return daemon


def transcription_config(stt: FakeOpenAIAudio, **caps: Any) -> dict[str, Any]:
    return {
        "providers.speech": {"kind": "openai", "base_url": stt.base_url, "api_key": stt.api_key},
        "media.transcription": {"provider": "speech", "model": "whisper-1", **caps},
    }


def tool_results(body: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(content, is_error) of the tool results in the last user message of a request."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user" or isinstance(message.get("content"), str):
            continue
        found = []
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    content = "".join(c.get("text", "") for c in content)
                found.append((str(content), bool(block.get("is_error"))))
        return found
    return []


def user_text(body: Mapping[str, Any]) -> str:
    """All text of the last user message (every text block joined), without the time it
    opens with."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return said(content)
            texts = [b.get("text", "") for b in content if b.get("type") == "text"]
            return "\n".join(t for t in texts if not TIME_STAMP.fullmatch(t))
    return ""
