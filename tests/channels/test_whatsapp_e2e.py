"""WhatsApp end to end: the whole daemon, the real webhook server and Graph client against the
fake Cloud API, Meta's signed posts, the fake model. A DM answered (read receipt and typing
first), a stranger paired, the verification handshake, forged posts refused with nothing run,
Meta's retries answered once, an image understood, a long reply in chunks, a file sent by
media id, cron messages outside the 24-hour window held, reported and sent when the person
writes (also across a restart), `/stop` as text, and `perch doctor` / `perch onboard`."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.tools.cron import CronRequest
from bot.daemon import Daemon
from bot.operator.cli import main
from bot.operator.doctor import run_checks
from channels.base import ChatRef, OutboundFile, OutboundVoice
from channels.whatsapp.adapter import WhatsAppChannel
from tests.fakes import whatsapp as wa
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.fakes.whatsapp import ALICE, BOB, FakeGraph
from tests.harness import make_config
from tests.media_support import transcription_config, user_text
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def graph() -> AsyncIterator[FakeGraph]:
    async with FakeGraph() as server:
        yield server


def settings(graph: FakeGraph, **options: Any) -> dict[str, Any]:
    return {
        "channels.whatsapp": {
            "enabled": True,
            "phone_number_id": wa.PHONE_NUMBER_ID,
            "access_token": wa.TOKEN,
            "app_secret": wa.APP_SECRET,
            "verify_token": wa.VERIFY_TOKEN,
            "api_base": graph.api_base,
            "webhook_port": 0,
            "allow_from": [f"+{ALICE}"],
            "retry_initial": 0.01,
            **options,
        }
    }


@asynccontextmanager
async def daemon(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph, **options: Any
) -> AsyncIterator[Daemon]:
    config = make_config(tmp_path, model.base_url, settings(graph, **options))
    running = Daemon(config)
    await running.start()
    try:
        channel = running.channels["whatsapp"]
        assert isinstance(channel, WhatsAppChannel)
        graph.webhook_url = f"http://127.0.0.1:{channel.webhook_port}/whatsapp/webhook"
        yield running
    finally:
        await running.stop()


async def test_a_dm_is_answered_after_a_read_receipt_and_a_stranger_is_paired(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    async with daemon(tmp_path, model, graph):
        body, wamid = wa.text("hello bot")
        assert await graph.post(body) == 200
        await graph.wait(lambda: graph.texts(ALICE) == ["echo: hello bot"])
        [receipt, *_] = graph.read_receipts()
        assert receipt["message_id"] == wamid and receipt["typing_indicator"] == {"type": "text"}
        assert last_user_text(model.requests[0]).endswith("hello bot")

        stranger, _ = wa.text("who are you?", sender=BOB)
        assert await graph.post(stranger) == 200
        await graph.wait(lambda: len(graph.texts(BOB)) == 1)
        assert "pairing code" in graph.texts(BOB)[0]
        await graph.wait(lambda: len(graph.texts(ALICE)) == 2)  # the owner is told
        assert "perch pairing approve whatsapp" in graph.texts(ALICE)[1]
        assert len(model.requests) == 1


async def test_the_verification_handshake_answers_the_challenge_only_for_our_token(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    async with daemon(tmp_path, model, graph):
        assert await graph.verify(wa.VERIFY_TOKEN, "8251") == (200, "8251")
        status, text = await graph.verify("guess", "8251")
        assert status == 403 and "8251" not in text


async def test_a_forged_or_unsigned_post_is_refused_and_runs_nothing(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "channels.whatsapp")
    async with daemon(tmp_path, model, graph):
        forged, _ = wa.text("run this")
        assert await graph.post(forged, secret="not-the-app-secret") == 401
        assert await graph.post(forged, secret=None) == 401
        tampered, _ = wa.text("original")
        changed = json.dumps(tampered).replace("original", "rm -rf ~").encode()
        assert await graph.post(tampered, raw=changed) == 401  # signed, then changed
        honest, _ = wa.text("after the forgeries")
        assert await graph.post(honest) == 200
        await graph.wait(lambda: graph.texts(ALICE) == ["echo: after the forgeries"])
    assert len(model.requests) == 1
    assert "run this" not in str(model.requests) and "rm -rf" not in str(model.requests)
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1  # once a minute, however many
    assert wa.APP_SECRET not in caplog.text


async def test_a_message_meta_delivers_again_is_answered_once(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    async with daemon(tmp_path, model, graph):
        body, _ = wa.text("only once please")
        assert await graph.post(body) == 200
        await graph.wait(lambda: len(graph.texts(ALICE)) == 1)
        assert await graph.post(body) == 200  # Meta's retry of the same message id
        again, _ = wa.text("next")
        assert await graph.post(again) == 200
        await graph.wait(lambda: len(graph.texts(ALICE)) == 2)
    assert graph.texts(ALICE) == ["echo: only once please", "echo: next"]
    assert len(model.requests) == 2


async def test_an_image_is_downloaded_by_media_id_and_shown_to_the_model(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    graph.media["img1"] = wa.Media("image/png", PNG)
    async with daemon(tmp_path, model, graph):
        body, _ = wa.inbound(
            "image", {"id": "img1", "mime_type": "image/png", "caption": "what is this?"}
        )
        assert await graph.post(body) == 200
        await graph.wait(lambda: len(graph.texts(ALICE)) == 1)
    content = model.requests[0]["messages"][-1]["content"]
    images = [block for block in content if block.get("type") == "image"]
    assert images and base64.b64decode(images[0]["source"]["data"]) == PNG
    assert "what is this?" in last_user_text(model.requests[0])


async def test_a_long_reply_arrives_in_chunks_of_at_most_4096_characters(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(40)]
    model.queue(Reply.text("\n\n".join(paragraphs)))
    async with daemon(tmp_path, model, graph):
        body, _ = wa.text("tell me everything")
        assert await graph.post(body) == 200
        await graph.wait(lambda: any("Paragraph 39" in t for t in graph.texts(ALICE)))
    texts = graph.texts(ALICE)
    assert len(texts) >= 8 and all(len(t) <= 4096 for t in texts)
    joined = " ".join(" ".join(texts).split())
    assert joined == " ".join(" ".join(paragraphs).split())


async def test_a_file_is_uploaded_then_sent_by_media_id(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    async with daemon(tmp_path, model, graph) as running:
        channel = running.channels["whatsapp"]
        assert isinstance(channel, WhatsAppChannel)
        chat = ChatRef("whatsapp", wa.PHONE_NUMBER_ID, "dm", ALICE)
        await channel.send_file(
            OutboundFile(chat, "chart.png", "image/png", PNG, "the chart", True)
        )
        await channel.send_file(OutboundFile(chat, "notes.txt", "text/plain", b"hi", "notes"))
    [image] = graph.sent(ALICE, "image")
    assert (
        graph.media[image["image"]["id"]].data == PNG and image["image"]["caption"] == "the chart"
    )
    [document] = graph.sent(ALICE, "document")
    assert document["document"]["filename"] == "notes.txt"
    assert graph.media[document["document"]["id"]].data == b"hi"


async def cron_to_owner(running: Daemon, message: str) -> None:
    assert running.cron is not None and running.scheduler is not None
    await running.cron.add_job(CronRequest("at", "+0.1s", message, deliver_to="owner"))
    await running.scheduler.sync()


async def test_a_cron_message_outside_the_window_is_held_reported_and_sent_when_they_write(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    graph.outside_window.add(ALICE)
    model.queue(Reply.text("Your 9 o'clock reminder: call the bank."))
    async with daemon(tmp_path, model, graph) as running:
        await cron_to_owner(running, "Remind the owner to call the bank.")
        await graph.wait(lambda: any(c.status == 400 for c in graph.calls))

        def held() -> str:
            return running.status()["channels"]["whatsapp"]["detail"]

        await eventually(lambda: "1 message(s)" in held())  # the status announces nothing
        assert "24-hour window" in held() and graph.texts(ALICE) == []

        graph.outside_window.clear()  # Alice writes: her window opens
        body, _ = wa.text("good morning")
        assert await graph.post(body) == 200
        await graph.wait(lambda: len(graph.texts(ALICE)) == 2)
        assert graph.texts(ALICE) == [
            "Your 9 o'clock reminder: call the bank.",
            "echo: good morning",
        ]
        assert "held" not in held()


async def test_a_failed_status_for_the_window_holds_the_message_across_a_restart(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    graph.fail_later.add(ALICE)  # accepted, then reported failed with 131047
    model.queue(Reply.text("Weekly summary: all quiet."))
    async with daemon(tmp_path, model, graph) as running:
        await cron_to_owner(running, "Send the weekly summary.")
        await graph.wait(lambda: "held" in running.status()["channels"]["whatsapp"]["detail"])
    graph.fail_later.clear()
    async with daemon(tmp_path, model, graph) as running:
        assert "1 message(s)" in running.status()["channels"]["whatsapp"]["detail"]
        body, _ = wa.text("hi again")
        assert await graph.post(body) == 200
        await graph.wait(lambda: "echo: hi again" in graph.texts(ALICE))
        assert graph.texts(ALICE).count("Weekly summary: all quiet.") == 2  # failed, then sent


async def test_stop_is_a_text_command(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    model.queue(Reply.hang())
    async with daemon(tmp_path, model, graph):
        body, _ = wa.text("write me a long essay")
        assert await graph.post(body) == 200
        await model.wait_requests(1)
        stop, _ = wa.text("/stop")
        assert await graph.post(stop) == 200
        await graph.wait(lambda: any("top" in t for t in graph.texts(ALICE)))
    assert not any(t.startswith("echo:") for t in graph.texts(ALICE))


async def test_doctor_checks_the_number_and_token_live(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    config = make_config(tmp_path, model.base_url, settings(graph))
    [check] = [c for c in await run_checks(config) if c.name == "whatsapp"]
    assert check.ok, check.line()
    assert "+1 555-010-9999" in check.line()

    wrong = settings(graph)
    wrong["channels.whatsapp"]["access_token"] = "EAAwrongtoken0123456789abcdefghij"
    config = make_config(tmp_path, model.base_url, wrong)
    [check] = [c for c in await run_checks(config) if c.name == "whatsapp"]
    assert not check.ok and "401" in check.line() and "access_token" in check.line()
    assert "EAAwrongtoken" not in check.line()


async def test_onboard_sets_whatsapp_up_and_checks_it_live(
    tmp_path: Path, graph: FakeGraph, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-ant-onboard-whatsapp"
    config, env_file = tmp_path / "config.yaml", tmp_path / "perch.env"
    async with FakeAnthropic(api_key=key) as model_server:
        code = await asyncio.to_thread(
            main,
            [
                *("onboard", "--config", str(config), "--yes", "--no-doctor"),
                *("--api-key", key, "--base-url", model_server.base_url),
                *("--channels", "whatsapp"),
                *("--env", f"WHATSAPP_PHONE_NUMBER_ID={wa.PHONE_NUMBER_ID}"),
                *("--env", f"WHATSAPP_ACCESS_TOKEN={wa.TOKEN}"),
                *("--env", f"WHATSAPP_APP_SECRET={wa.APP_SECRET}"),
                *("--env", f"WHATSAPP_VERIFY_TOKEN={wa.VERIFY_TOKEN}"),
                *("--set", f"channels.whatsapp.api_base={graph.api_base}"),
                *("--owner", f"whatsapp:+{ALICE}", "--secrets-path", str(env_file)),
                *("--secrets", "env"),
            ],
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK    whatsapp: business number +1 555-010-9999" in out
    data = yaml.safe_load(config.read_text())["channels"]["whatsapp"]
    assert data["enabled"] is True and data["allow_from"] == [f"+{ALICE}"]
    assert wa.TOKEN not in config.read_text() and wa.TOKEN in env_file.read_text()


async def test_a_voice_note_is_downloaded_and_transcribed(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    opus = b"OggS" + b"\x00" * 200
    graph.media["voice1"] = wa.Media("audio/ogg; codecs=opus", opus)
    async with FakeOpenAIAudio() as stt:
        stt.transcripts[opus] = "remind me to water the plants"
        config = {**settings(graph), **transcription_config(stt)}
        running = Daemon(make_config(tmp_path, model.base_url, config))
        await running.start()
        try:
            channel = running.channels["whatsapp"]
            assert isinstance(channel, WhatsAppChannel)
            graph.webhook_url = f"http://127.0.0.1:{channel.webhook_port}/whatsapp/webhook"
            body, _ = wa.inbound(
                "audio", {"id": "voice1", "mime_type": "audio/ogg; codecs=opus", "voice": True}
            )
            assert await graph.post(body) == 200
            await graph.wait(lambda: len(graph.texts(ALICE)) == 1)
        finally:
            await running.stop()
        [request] = stt.requests
        assert request.data == opus and request.filename == "voice.ogg"
    assert user_text(model.requests[-1]) == "[voice transcript] remind me to water the plants"


async def test_a_voice_note_goes_out_as_an_audio_message_by_media_id(
    tmp_path: Path, model: FakeAnthropic, graph: FakeGraph
) -> None:
    async with daemon(tmp_path, model, graph) as running:
        channel = running.channels["whatsapp"]
        assert isinstance(channel, WhatsAppChannel)
        chat = ChatRef("whatsapp", wa.PHONE_NUMBER_ID, "dm", ALICE)
        await channel.send_voice(OutboundVoice(chat, b"OggS" + b"\x00" * 64, 1.5))
    [audio] = graph.sent(ALICE, "audio")
    uploaded = graph.media[audio["audio"]["id"]]
    assert uploaded.media_type == "audio/ogg" and uploaded.data.startswith(b"OggS")
