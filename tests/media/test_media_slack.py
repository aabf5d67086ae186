"""Media on Slack end to end: slack-bolt/slack_sdk against the fake Slack, the whole daemon.
Audio clips transcribed, documents read, files out through the external upload flow,
reactions by emoji name (acknowledgement and the `react` tool)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import av
import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.fakes.slack import FakeSlack
from tests.media_support import started, tool_results, transcription_config, user_text
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

WEBM = b"\x1aE\xdf\xa3" + b"\x02" * 300


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def sl() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def slack(sl: FakeSlack, **extra: Any) -> dict[str, Any]:
    return {
        "channels.slack": {
            "enabled": True,
            "bot_token": "xoxb-test",
            "app_token": "xapp-test",
            "base_url": sl.base_url,
            "allow_from": ["UALICE"],
            **extra,
        }
    }


def dm(sl: FakeSlack, text: str, files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message",
        "channel": "D100",
        "channel_type": "im",
        "user": "UALICE",
        "text": text,
        "ts": sl.new_ts(),
    }
    if files:
        event["subtype"] = "file_share"
        event["files"] = files
    return event


async def test_audio_clip_is_transcribed_and_a_text_file_read(
    tmp_path: Path, model: FakeAnthropic, sl: FakeSlack
) -> None:
    async with FakeOpenAIAudio() as stt:
        stt.transcripts[WEBM] = "what is on my calendar"
        daemon = await started(tmp_path, model, {**slack(sl), **transcription_config(stt)})
        try:
            await sl.wait_connections(1)
            clip = sl.add_file("audio_message.webm", WEBM, "audio/webm")
            notes = sl.add_file("notes.md", b"# Plan\n- ship it\n", "text/markdown")
            await sl.push_event(dm(sl, "", [clip, notes]))
            await sl.wait_for("chat.postMessage", 1)
            (request,) = stt.requests
            assert request.data == WEBM and request.filename == "audio_message.webm"
            asked = user_text(model.requests[-1])
            assert asked == (
                "[voice transcript] what is on my calendar\n\n"
                "[file notes.md]\n# Plan\n- ship it\n\n[end of file notes.md]"
            )
        finally:
            await daemon.stop()


async def test_send_file_uses_the_external_upload_flow_in_the_chat(
    tmp_path: Path, model: FakeAnthropic, sl: FakeSlack
) -> None:
    daemon = await started(tmp_path, model, slack(sl))
    (tmp_path / "workspace" / "summary.csv").write_text("a,b\n1,2\n")
    model.queue(
        Reply.tool_use([("send_file", {"path": "summary.csv", "caption": "numbers"})]),
        Reply.text("Sent."),
    )
    try:
        await sl.wait_connections(1)
        await sl.push_event(dm(sl, "send the summary"))
        await sl.wait_for("chat.postMessage", 1)
        (ask,) = sl.calls_to("files.getUploadURLExternal")
        assert ask.params["filename"] == "summary.csv" and int(ask.params["length"]) == 8
        (complete,) = sl.calls_to("files.completeUploadExternal")
        assert complete.params["channel_id"] == "D100"
        assert complete.params["initial_comment"] == "numbers"
        (file_id,) = [f["id"] for f in json.loads(complete.params["files"])]
        assert sl.uploads[file_id] == ("summary.csv", b"a,b\n1,2\n")
        assert tool_results(model.requests[-1])[0][1] is False
    finally:
        await daemon.stop()


async def test_a_refused_upload_is_a_tool_error(
    tmp_path: Path, model: FakeAnthropic, sl: FakeSlack
) -> None:
    daemon = await started(tmp_path, model, slack(sl))
    (tmp_path / "workspace" / "a.txt").write_text("x")
    sl.fail_next("files.completeUploadExternal", 200, None, "not_in_channel")
    model.queue(Reply.tool_use([("send_file", {"path": "a.txt"})]), Reply.text("Sorry."))
    try:
        await sl.wait_connections(1)
        await sl.push_event(dm(sl, "send it"))
        await sl.wait_for("chat.postMessage", 1)
        ((content, is_error),) = tool_results(model.requests[-1])
        assert is_error and "not_in_channel" in content
    finally:
        await daemon.stop()


async def test_ack_reaction_by_name_and_the_react_tool(
    tmp_path: Path, model: FakeAnthropic, sl: FakeSlack
) -> None:
    daemon = await started(tmp_path, model, slack(sl, ack_reaction="👀"))
    model.queue(Reply.tool_use([("react", {"emoji": "🎉"})]), Reply.text("Congrats!"))
    try:
        await sl.wait_connections(1)
        event = dm(sl, "I passed the exam")
        await sl.push_event(event)
        await sl.wait_for("chat.postMessage", 1)
        await sl.wait_for("reactions.remove", 1)
        added = [(c.params["name"], c.params["timestamp"]) for c in sl.calls_to("reactions.add")]
        assert added == [("eyes", event["ts"]), ("tada", event["ts"])]
        (removed,) = sl.calls_to("reactions.remove")
        assert removed.params["name"] == "eyes"

        model.queue(Reply.tool_use([("react", {"emoji": "🦜"})]), Reply.text("ok"))
        await sl.push_event(dm(sl, "again"))
        await eventually(lambda: len(model.requests) == 4)
        ((content, is_error),) = tool_results(model.requests[-1])
        assert is_error and ":name:" in content
    finally:
        await daemon.stop()


async def test_an_audio_clip_is_answered_with_an_ogg_opus_file_then_the_text(
    tmp_path: Path, model: FakeAnthropic, sl: FakeSlack
) -> None:
    model.queue(Reply.text("Your calendar is *empty*."))
    async with FakeOpenAIAudio() as audio:
        overrides = {
            **slack(sl),
            **transcription_config(audio),
            "agent.voice": {"provider": "speech"},
        }
        daemon = await started(tmp_path, model, overrides)
        try:
            await sl.wait_connections(1)
            clip = sl.add_file("audio_message.webm", WEBM, "audio/webm")
            await sl.push_event(dm(sl, "", [clip]))
            await sl.wait_for("files.completeUploadExternal", 1, timeout=20)
            (complete,) = sl.calls_to("files.completeUploadExternal")
            assert complete.params["channel_id"] == "D100"
            (file_id,) = [f["id"] for f in json.loads(complete.params["files"])]
            name, data = sl.uploads[file_id]
            assert name == "voice-reply.ogg"
            with av.open(io.BytesIO(data)) as container:
                stream = container.streams.audio[0]
                assert (container.format.name, stream.codec_context.name) == ("ogg", "opus")
            await eventually(lambda: len(sl.calls_to("chat.postMessage")) >= 1, timeout=10)
            assert "empty" in sl.calls_to("chat.postMessage")[-1].params["text"]
            assert [r.input for r in audio.speech_requests] == ["Your calendar is empty."]
        finally:
            await daemon.stop()
