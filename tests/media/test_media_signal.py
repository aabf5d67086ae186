"""Media on Signal end to end: our aiohttp client against the fake signal-cli-rest-api, the
whole daemon. Voice attachments transcribed, files out as base64 attachments in /v2/send,
reactions through /v1/reactions (POST to add, DELETE to take back)."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import av
import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.fakes.signal import FakeSignal
from tests.media_support import started, tool_results, transcription_config, user_text

pytestmark = pytest.mark.timeout(60)

ALICE = "+15550002"
BOT = "+15550001"
AAC = b"\xff\xf1" + b"\x03" * 400
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 60


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def sg() -> AsyncIterator[FakeSignal]:
    async with FakeSignal(BOT) as fake:
        yield fake


def signal(sg: FakeSignal, **extra: Any) -> dict[str, Any]:
    return {
        "channels.signal": {
            "enabled": True,
            "number": BOT,
            "service_url": sg.url,
            "allow_from": [ALICE],
            "retry_initial": 0.01,
            **extra,
        }
    }


async def test_voice_attachment_is_downloaded_and_transcribed(
    tmp_path: Path, model: FakeAnthropic, sg: FakeSignal
) -> None:
    async with FakeOpenAIAudio() as stt:
        stt.transcripts[AAC] = "call mum at six"
        daemon = await started(tmp_path, model, {**signal(sg), **transcription_config(stt)})
        try:
            await sg.wait_connected()
            voice = sg.add_attachment("v1", AAC, "audio/aac")
            voice["voiceNote"] = True
            voice.pop("filename")
            await sg.dm(ALICE, None, attachments=[voice])
            await sg.wait_for(lambda: len(sg.sent) >= 1)
            (request,) = stt.requests
            assert request.data == AAC and request.filename == "voice.m4a"
            assert user_text(model.requests[-1]) == "[voice transcript] call mum at six"
        finally:
            await daemon.stop()


async def test_send_file_is_a_base64_attachment_with_the_caption_as_text(
    tmp_path: Path, model: FakeAnthropic, sg: FakeSignal
) -> None:
    daemon = await started(tmp_path, model, signal(sg))
    (tmp_path / "workspace" / "map.png").write_bytes(PNG)
    model.queue(
        Reply.tool_use([("send_file", {"path": "map.png", "caption": "the route"})]),
        Reply.text("There you go."),
    )
    try:
        await sg.wait_connected()
        await sg.dm(ALICE, "send the map")
        await sg.wait_for(lambda: len(sg.sent) >= 2)
        file_message = sg.sent[0]
        assert file_message["recipients"] == [ALICE]
        assert file_message["message"] == "the route"
        (attachment,) = file_message["base64_attachments"]
        head, _, data = attachment.partition(";base64,")
        assert head == "data:image/png;filename=map.png"
        assert base64.b64decode(data) == PNG
        assert sg.sent[1]["message"] == "There you go."
    finally:
        await daemon.stop()


async def test_a_refused_file_is_a_tool_error(
    tmp_path: Path, model: FakeAnthropic, sg: FakeSignal
) -> None:
    daemon = await started(tmp_path, model, signal(sg))
    (tmp_path / "workspace" / "a.txt").write_text("x")
    sg.fail_next("/v2/send", 400)
    model.queue(Reply.tool_use([("send_file", {"path": "a.txt"})]), Reply.text("Sorry."))
    try:
        await sg.wait_connected()
        await sg.dm(ALICE, "send it")
        await sg.wait_for(lambda: any(m.get("message") == "Sorry." for m in sg.sent))
        ((content, is_error),) = tool_results(model.requests[-1])
        assert is_error and "HTTP 400" in content
    finally:
        await daemon.stop()


async def test_ack_reaction_is_posted_then_deleted_after_the_reply(
    tmp_path: Path, model: FakeAnthropic, sg: FakeSignal
) -> None:
    daemon = await started(tmp_path, model, signal(sg, ack_reaction="👀"))
    try:
        await sg.wait_connected()
        stamp = await sg.dm(ALICE, "hi")
        await sg.wait_for(lambda: len(sg.requests_to("DELETE", "/v1/reactions/")) == 1)
        (added,) = sg.requests_to("POST", "/v1/reactions/")
        (removed,) = sg.requests_to("DELETE", "/v1/reactions/")
        expected = {
            "recipient": ALICE,
            "reaction": "👀",
            "target_author": ALICE,
            "timestamp": stamp,
        }
        assert added.body == expected and removed.body == expected
        assert sg.sent[-1]["message"] == "echo: hi"
    finally:
        await daemon.stop()


async def test_a_voice_note_is_answered_with_an_ogg_opus_attachment_and_its_text(
    tmp_path: Path, model: FakeAnthropic, sg: FakeSignal
) -> None:
    model.queue(Reply.text("Mum at six, noted."))
    async with FakeOpenAIAudio() as audio:
        overrides = {
            **signal(sg),
            **transcription_config(audio),
            "agent.voice": {"provider": "speech"},
        }
        daemon = await started(tmp_path, model, overrides)
        try:
            await sg.wait_connected()
            voice = sg.add_attachment("v1", AAC, "audio/aac")
            voice["voiceNote"] = True
            await sg.dm(ALICE, None, attachments=[voice])
            await sg.wait_for(lambda: len(sg.sent) >= 1, within=20)
            (message,) = sg.sent
            assert message["recipients"] == [ALICE]
            assert message["message"] == "Mum at six, noted."
            (attachment,) = message["base64_attachments"]
            head, _, data = attachment.partition(";base64,")
            assert head == "data:audio/ogg;filename=voice.ogg"
            with av.open(io.BytesIO(base64.b64decode(data))) as container:
                stream = container.streams.audio[0]
                assert (container.format.name, stream.codec_context.name) == ("ogg", "opus")
                assert sum(frame.samples for frame in container.decode(stream)) > 0
            assert [r.input for r in audio.speech_requests] == ["Mum at six, noted."]
        finally:
            await daemon.stop()
