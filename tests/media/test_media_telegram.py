"""Media on Telegram end to end: real python-telegram-bot against the fake Bot API, the whole
daemon, the fake model and a fake speech-to-text server. Voice notes in (transcribed, capped,
refused when not set up), documents in (text, PDF, saved), files out, reactions."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.fakes.telegram import TOKEN, FakeTelegram, Upload
from tests.media_support import started, tool_results, transcription_config, user_text
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

OGG = b"OggS" + b"\x01" * 200
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 60


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def stt() -> AsyncIterator[FakeOpenAIAudio]:
    async with FakeOpenAIAudio() as fake:
        yield fake


def telegram(tg: FakeTelegram, **extra: Any) -> dict[str, Any]:
    return {
        "channels.telegram": {
            "enabled": True,
            "token": TOKEN,
            "base_url": tg.base_url,
            "allow_from": ["42"],
            "retry_backoff": 0.01,
            **extra,
        }
    }


# -- voice in ---------------------------------------------------------------------------------


async def test_voice_note_is_transcribed_and_enters_the_turn_marked_as_a_transcript(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, stt: FakeOpenAIAudio
) -> None:
    stt.transcripts[OGG] = "remind me to water the plants"
    daemon = await started(tmp_path, model, {**telegram(tg), **transcription_config(stt)})
    try:
        tg.voice(OGG, caption="quick one")
        await tg.wait_for("sendMessage", 1, timeout=10)
        (request,) = stt.requests
        assert request.data == OGG
        assert request.model == "whisper-1"
        assert request.filename.endswith(".ogg")
        assert request.authorization == f"Bearer {stt.api_key}"
        asked = user_text(model.requests[-1])
        assert asked == "quick one\n\n[voice transcript] remind me to water the plants"
        assert "[voice transcript]" in model.requests[-1]["system"][0]["text"]
    finally:
        await daemon.stop()


async def test_a_transcript_with_a_lone_surrogate_is_answered_and_saved(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, stt: FakeOpenAIAudio
) -> None:
    stt.transcripts[OGG] = "water \ud800 the plants"  # in the service's JSON as an escape
    daemon = await started(tmp_path, model, {**telegram(tg), **transcription_config(stt)})
    try:
        tg.voice(OGG)
        await tg.wait_for("sendMessage", 1, timeout=10)
        assert user_text(model.requests[-1]) == "[voice transcript] water \ufffd the plants"
        assert daemon.store is not None
        (session,) = await daemon.store.list_sessions()
        assert len(await daemon.store.messages(session.id)) == 2
    finally:
        await daemon.stop()


async def test_voice_without_transcription_gets_one_line_and_no_model_call(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    try:
        tg.voice(OGG)
        await tg.wait_for("sendMessage", 1, timeout=10)
        assert tg.texts() == [
            "Voice messages aren't set up here yet; please type your message instead."
        ]
        assert model.requests == []
    finally:
        await daemon.stop()


async def test_voice_over_the_duration_or_size_cap_gets_a_plain_answer(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, stt: FakeOpenAIAudio
) -> None:
    overrides = {
        **telegram(tg),
        **transcription_config(stt, max_duration_s=60, max_bytes=100_000),
    }
    daemon = await started(tmp_path, model, overrides)
    try:
        tg.voice(OGG, duration=300)
        await tg.wait_for("sendMessage", 1, timeout=10)
        assert "too long" in tg.texts()[-1] and "5 min, limit 1 min" in tg.texts()[-1]
        tg.voice(b"OggS" + b"\x00" * 150_000)
        await tg.wait_for("sendMessage", 2, timeout=10)
        assert "too large" in tg.texts()[-1] and "limit 0.1 MB" in tg.texts()[-1]
        assert stt.requests == [] and model.requests == []
    finally:
        await daemon.stop()


async def test_a_failing_speech_service_is_said_plainly_and_the_caption_still_answered(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, stt: FakeOpenAIAudio
) -> None:
    stt.fail_next(503)
    daemon = await started(tmp_path, model, {**telegram(tg), **transcription_config(stt)})
    try:
        tg.voice(OGG, caption="see voice")
        await tg.wait_for("sendMessage", 1, timeout=10)
        asked = user_text(model.requests[-1])
        assert asked.startswith("see voice")
        assert "[voice message not understood: I couldn't transcribe" in asked
        assert "HTTP 503" in asked
    finally:
        await daemon.stop()


# -- documents in -----------------------------------------------------------------------------


async def test_text_documents_become_text_and_other_files_are_saved_to_the_workspace(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    try:
        tg.document(b"a,b\n1,2\n", "data.csv", "text/csv")
        await tg.wait_for("sendMessage", 1, timeout=10)
        assert (
            user_text(model.requests[-1]) == "[file data.csv]\na,b\n1,2\n\n[end of file data.csv]"
        )

        tg.document(b"\x00\x01binary", "../../evil.bin", "application/octet-stream")
        await tg.wait_for("sendMessage", 2, timeout=10)
        asked = user_text(model.requests[-1])
        assert asked.startswith("[file saved: inbox/") and "/evil.bin (" in asked
        saved = asked.removeprefix("[file saved: ").split(" (")[0]
        assert (tmp_path / "workspace" / saved).read_bytes() == b"\x00\x01binary"
    finally:
        await daemon.stop()


async def test_text_over_the_cap_is_truncated_with_a_marker(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, {**telegram(tg), "media.documents": {"max_chars": 100}})
    try:
        tg.document(b"x" * 500, "long.md", "text/markdown")
        await tg.wait_for("sendMessage", 1, timeout=10)
        asked = user_text(model.requests[-1])
        assert "x" * 100 + "\n[... truncated: 100 of 500 characters]" in asked
        assert "x" * 101 not in asked
    finally:
        await daemon.stop()


async def test_pdf_text_is_extracted(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    try:
        tg.document(minimal_pdf("Quarterly numbers are up"), "report.pdf", "application/pdf")
        await tg.wait_for("sendMessage", 1, timeout=10)
        asked = user_text(model.requests[-1])
        assert asked.startswith("[file report.pdf]\nQuarterly numbers are up")
    finally:
        await daemon.stop()


# -- files out --------------------------------------------------------------------------------


async def test_send_file_sends_documents_and_images_as_photos(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    workspace = tmp_path / "workspace"
    (workspace / "out").mkdir(parents=True, exist_ok=True)
    (workspace / "out" / "report.txt").write_text("the report")
    (workspace / "chart.png").write_bytes(PNG)
    model.queue(
        Reply.tool_use(
            [
                ("send_file", {"path": "out/report.txt", "caption": "here it is"}),
                ("send_file", {"path": "chart.png"}),
            ]
        ),
        Reply.text("Done."),
    )
    try:
        tg.dm("send me the report", user_id=42)
        await tg.wait_for("sendMessage", 1, timeout=10)
        (document,) = tg.calls("sendDocument")
        assert document.params["document"] == Upload("report.txt", "text/plain", b"the report")
        assert document.params["caption"] == "here it is"
        assert document.params["chat_id"] == 42
        (photo,) = tg.calls("sendPhoto")
        assert photo.params["photo"].data == PNG
        results = tool_results(model.requests[-1])
        assert [r[1] for r in results] == [False, False]
        assert "as a document" in results[0][0] and "as a photo" in results[1][0]
    finally:
        await daemon.stop()


async def test_send_file_refusals_are_tool_errors_the_model_reads(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    workspace = tmp_path / "workspace"
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(secret, workspace / "link.txt")
    os.link(secret, workspace / "hard.txt")
    (workspace / "fine.txt").write_text("fine")
    tg.fail_next("sendDocument", 400, description="Bad Request: file is empty")
    model.queue(
        Reply.tool_use(
            [
                ("send_file", {"path": "link.txt"}),
                ("send_file", {"path": "hard.txt"}),
                ("send_file", {"path": "../secret.txt"}),
                ("send_file", {"path": "fine.txt"}),
            ]
        ),
        Reply.text("Sorry."),
    )
    try:
        tg.dm("send files", user_id=42)
        await tg.wait_for("sendMessage", 1, timeout=10)
        results = tool_results(model.requests[-1])
        assert all(is_error for _, is_error in results)
        assert "symlink" in results[0][0]
        assert "hard links" in results[1][0]
        assert "'..'" in results[2][0]
        assert "refused fine.txt" in results[3][0] and "File is empty" in results[3][0]
        assert [c.params["document"].data for c in tg.calls("sendDocument", ok_only=False)] == [
            b"fine"
        ]
    finally:
        await daemon.stop()


# -- reactions --------------------------------------------------------------------------------


async def test_ack_reaction_goes_on_at_receipt_and_off_after_the_reply(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg, ack_reaction="👀"))
    try:
        sent = tg.dm("hello", user_id=42)
        await tg.wait_for("sendMessage", 1, timeout=10)
        calls = await tg.wait_for("setMessageReaction", 2, timeout=10)
        assert [c.params["reaction"] for c in calls] == [[{"type": "emoji", "emoji": "👀"}], []]
        assert all(c.params["message_id"] == sent["message_id"] for c in calls)
    finally:
        await daemon.stop()


async def test_no_ack_reaction_by_default_and_the_react_tool_reacts_to_the_message(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> None:
    daemon = await started(tmp_path, model, telegram(tg))
    model.queue(Reply.tool_use([("react", {"emoji": "👍"})]), Reply.text("NO_REPLY"))
    try:
        sent = tg.dm("thanks!", user_id=42)
        await eventually(lambda: len(model.requests) == 2)
        (call,) = tg.calls("setMessageReaction")
        assert call.params["reaction"] == [{"type": "emoji", "emoji": "👍"}]
        assert call.params["message_id"] == sent["message_id"]
        assert tool_results(model.requests[-1]) == [("Reacted with 👍.", False)]
    finally:
        await daemon.stop()


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF whose page shows `text` in Helvetica (enough for pypdf to extract)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out
