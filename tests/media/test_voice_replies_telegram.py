"""Spoken replies on Telegram end to end: real python-telegram-bot against the fake Bot API,
the whole daemon, the fake model, and the fake OpenAI-compatible `/v1/audio/speech` (or
espeak-ng, where installed). The voice note sent is decoded with PyAV to prove it is OGG/Opus."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import av
import pytest

from bot.media.speech import EspeakSpeech
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.fakes.telegram import FakeTelegram, Upload
from tests.media.test_media_telegram import OGG, telegram
from tests.media_support import started, transcription_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def audio() -> AsyncIterator[FakeOpenAIAudio]:
    async with FakeOpenAIAudio() as fake:
        yield fake


def voice_config(audio: FakeOpenAIAudio, **voice: Any) -> dict[str, Any]:
    """Speech to text and text to speech on the same fake provider."""
    return {**transcription_config(audio), "agent.voice": {"provider": "speech", **voice}}


def decoded(note: bytes) -> tuple[str, str, int, int, int]:
    """(container, codec, rate, channels, samples) of a voice note, decoded with PyAV."""
    with av.open(io.BytesIO(note)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return (
            container.format.name,
            stream.codec_context.name,
            stream.codec_context.sample_rate,
            stream.codec_context.layout.nb_channels,
            samples,
        )


def sent_note(tg: FakeTelegram) -> tuple[bytes, dict[str, Any]]:
    (call,) = tg.calls("sendVoice")
    upload = call.params["voice"]
    assert isinstance(upload, Upload)
    return upload.data, call.params


async def test_a_voice_note_is_answered_with_a_voice_note_captioned_with_the_text(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Water the **plants** at six, see [the guide](https://example.org/g)."))
    daemon = await started(tmp_path, model, {**telegram(tg), **voice_config(audio)})
    try:
        tg.voice(OGG)
        await tg.wait_for("sendVoice", 1, timeout=20)
        note, params = sent_note(tg)
        container, codec, rate, channels, samples = decoded(note)
        assert (container, codec, rate, channels) == ("ogg", "opus", 48_000, 1)
        assert samples > 48_000 // 2  # the fake's tone: at least 0.3 s, here about 1.6 s
        assert (
            params["caption"] == "Water the plants at six, see the guide (https://example.org/g)."
        )
        assert int(params["chat_id"]) == 42 and int(params["duration"]) >= 1
        (spoken,) = audio.speech_requests
        assert spoken.input == "Water the plants at six, see the guide."  # no URL read aloud
        assert spoken.response_format == "wav" and spoken.voice == "alloy"
        assert spoken.model == "gpt-4o-mini-tts"
        assert spoken.authorization == f"Bearer {audio.api_key}"
        assert tg.visible_texts() == []  # the text is the caption: nothing twice
    finally:
        await daemon.stop()


async def test_reply_never_answers_a_voice_note_with_text_only(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Noted."))
    overrides = {**telegram(tg), **voice_config(audio, reply="never")}
    daemon = await started(tmp_path, model, overrides)
    try:
        tg.voice(OGG)
        await tg.wait_for("sendMessage", 1, timeout=20)
        assert tg.visible_texts() == ["Noted."]
        assert tg.calls("sendVoice") == [] and audio.speech_requests == []
    finally:
        await daemon.stop()


async def test_auto_answers_a_typed_message_in_text_and_always_speaks_it(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Typed answer."))
    daemon = await started(tmp_path, model, {**telegram(tg), **voice_config(audio)})
    try:
        tg.push_update(tg.dm("hello"))
        await tg.wait_for("sendMessage", 1, timeout=20)
        assert tg.visible_texts() == ["Typed answer."] and audio.speech_requests == []
    finally:
        await daemon.stop()
    model.queue(Reply.text("Spoken answer."))
    overrides = {**telegram(tg), **voice_config(audio, reply="always")}
    (tmp_path / "always").mkdir()
    daemon = await started(tmp_path / "always", model, overrides)
    try:
        tg.push_update(tg.dm("hello again"))
        await tg.wait_for("sendVoice", 1, timeout=20)
        assert sent_note(tg)[1]["caption"] == "Spoken answer."
        assert [r.input for r in audio.speech_requests] == ["Spoken answer."]
    finally:
        await daemon.stop()


async def test_a_long_reply_is_spoken_up_to_max_chars_and_the_rest_follows_as_text(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    first = "First paragraph, the one that is spoken aloud. " * 2
    second = "Second paragraph, which only arrives as text. " * 4
    model.queue(Reply.text(f"{first.strip()}\n\n{second.strip()}"))
    overrides = {**telegram(tg), **voice_config(audio, max_chars=120)}
    daemon = await started(tmp_path, model, overrides)
    try:
        tg.voice(OGG)
        await tg.wait_for("sendVoice", 1, timeout=20)
        await eventually(lambda: len(tg.visible_texts()) == 1, timeout=10)
        (spoken,) = audio.speech_requests
        assert spoken.input == first.strip()
        assert sent_note(tg)[1]["caption"] == first.strip()
        assert tg.visible_texts() == [second.strip()]
        methods = [c.method for c in tg.sent if c.method in ("sendVoice", "sendMessage")]
        assert methods[-2:] == ["sendVoice", "sendMessage"]  # the note first, then the rest
    finally:
        await daemon.stop()


async def test_a_spoken_part_too_long_for_a_caption_follows_in_full_as_text(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    reply = "A sentence that goes on. " * 60  # 1,500 characters: over Telegram's 1,024
    model.queue(Reply.text(reply.strip()))
    overrides = {**telegram(tg), **voice_config(audio, max_chars=2000)}
    daemon = await started(tmp_path, model, overrides)
    try:
        tg.voice(OGG)
        # 1,500 characters of speech are encoded on a worker thread: on a busy machine (and on
        # the lowest PyAV) that takes a while, so the waits are long; nothing here is timed.
        await tg.wait_for("sendVoice", 1, timeout=40)
        await eventually(lambda: len(tg.visible_texts()) == 1, timeout=15)
        note, params = sent_note(tg)
        assert "caption" not in params
        assert tg.visible_texts() == [reply.strip()]
        assert decoded(note)[:2] == ("ogg", "opus")
    finally:
        await daemon.stop()


async def test_when_the_speech_service_fails_the_reply_arrives_as_text(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Still here in text."))
    async with FakeOpenAIAudio() as tts:
        tts.fail_next(503)
        overrides = {
            **telegram(tg),
            **transcription_config(audio),
            "providers.voice": {"kind": "openai", "base_url": tts.base_url, "api_key": tts.api_key},
            "agent.voice": {"provider": "voice"},
        }
        daemon = await started(tmp_path, model, overrides)
        try:
            tg.voice(OGG)
            await eventually(lambda: len(tts.speech_requests) == 1, timeout=20)
            await eventually(lambda: tg.visible_texts() == ["Still here in text."], timeout=10)
            assert tg.calls("sendVoice") == []
        finally:
            await daemon.stop()


@pytest.mark.skipif(not EspeakSpeech.installed(), reason="espeak-ng is not installed here")
async def test_the_local_espeak_engine_answers_a_voice_note_without_any_speech_server(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Hello from the local voice."))
    overrides = {
        **telegram(tg),
        **transcription_config(audio),
        "agent.voice": {"provider": "espeak"},
    }
    daemon = await started(tmp_path, model, overrides)
    try:
        tg.voice(OGG)
        await tg.wait_for("sendVoice", 1, timeout=20)
        note, params = sent_note(tg)
        container, codec, rate, channels, samples = decoded(note)
        assert (container, codec, rate, channels) == ("ogg", "opus", 48_000, 1)
        assert samples > 48_000 // 2
        assert params["caption"] == "Hello from the local voice."
        assert audio.speech_requests == []
    finally:
        await daemon.stop()


async def test_a_refused_voice_note_leaves_the_reply_as_text(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, audio: FakeOpenAIAudio
) -> None:
    model.queue(Reply.text("Voice notes are off here, so text."))
    tg.fail_next("sendVoice", 400, description="Bad Request: VOICE_MESSAGES_FORBIDDEN")
    daemon = await started(tmp_path, model, {**telegram(tg), **voice_config(audio)})
    try:
        tg.voice(OGG)
        await tg.wait_for("sendVoice", 1, timeout=20, ok_only=False)
        await eventually(
            lambda: tg.visible_texts() == ["Voice notes are off here, so text."], timeout=10
        )
    finally:
        await daemon.stop()
