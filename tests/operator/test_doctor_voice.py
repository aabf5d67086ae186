"""`perch doctor`'s voice line: the configured engine is made to speak a test line, through
the fake OpenAI-compatible `/v1/audio/speech` or espeak-ng where installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.media.speech import EspeakSpeech
from bot.operator.doctor_voice import voice_check
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.harness import make_config


def speech(audio: FakeOpenAIAudio, api_key: str | None = None) -> dict[str, object]:
    return {
        "providers.speech": {
            "kind": "openai",
            "base_url": audio.base_url,
            "api_key": api_key or audio.api_key,
        },
        "agent.voice": {"provider": "speech"},
    }


async def test_voice_is_off_without_a_provider(tmp_path: Path) -> None:
    check = await voice_check(make_config(tmp_path, "http://127.0.0.1:9"))
    assert check.ok and check.detail.startswith("off")


async def test_a_speaking_provider_passes_and_a_wrong_key_fails_with_the_fix(
    tmp_path: Path,
) -> None:
    async with FakeOpenAIAudio() as audio:
        check = await voice_check(make_config(tmp_path, "http://127.0.0.1:9", speech(audio)))
        assert check.ok and "speaks" in check.detail and "OGG/Opus" in check.detail
        assert [r.input for r in audio.speech_requests] == ["Perch is ready."]
        config = make_config(tmp_path, "http://127.0.0.1:9", speech(audio, "sk-wrong"))
        check = await voice_check(config)
    assert not check.ok and "HTTP 401" in check.detail and "providers.speech" in check.fix
    assert "sk-wrong" not in check.line()


@pytest.mark.skipif(not EspeakSpeech.installed(), reason="espeak-ng is not installed here")
async def test_espeak_passes_where_installed(tmp_path: Path) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9", {"agent.voice": {"provider": "espeak"}})
    check = await voice_check(config)
    assert check.ok and check.detail.startswith("espeak speaks")
