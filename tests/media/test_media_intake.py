"""Attachments into turn text without a platform: `MediaIntake` against the fake speech
server and a real workspace, the config checks of `media.transcription`, the inbox payload
round trip, and property tests of the name cleaners."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config.errors import ConfigError
from bot.config.media import DocumentsConfig, Endpoint, MediaConfig, TranscriptionConfig
from bot.media.intake import (
    MediaIntake,
    _safe_name,
    attachments_from_payload,
    attachments_to_payload,
)
from bot.media.transcription import AUDIO_SUFFIXES, Transcriber, audio_file_name
from channels.base import Attachment, ChatRef, Inbound
from channels.slack.media import emoji_name
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.harness import make_config
from tests.media_support import transcription_config

CHAT = ChatRef("memory", "acct", "dm", "c1")


def inbound(*attachments: Attachment, text: str = "") -> Inbound:
    return Inbound(CHAT, "u1", text, "m1", attachments=attachments)


def intake(workspace: Path, transcriber: Transcriber | None = None, **docs: object) -> MediaIntake:
    media = MediaConfig(
        transcription=TranscriptionConfig(provider="speech") if transcriber else None,
        documents=DocumentsConfig(**docs),  # type: ignore[arg-type]
    )
    return MediaIntake(media, transcriber, workspace)


async def test_saved_files_never_overwrite_and_keep_a_clean_name(tmp_path: Path) -> None:
    media = intake(tmp_path)
    first = await media.prepare(inbound(Attachment("file", "a/b/.x.zip", "application/zip", b"1")))
    second = await media.prepare(inbound(Attachment("file", "x.zip", "application/zip", b"2")))
    assert "/x.zip (application/zip, 1 bytes)]" in first.inbound.text
    assert "/x-2.zip (application/zip, 1 bytes)]" in second.inbound.text
    saved = sorted(p.name for p in (tmp_path / "inbox").rglob("*.zip"))
    assert saved == ["x-2.zip", "x.zip"]


async def test_an_inbox_symlinked_out_of_the_workspace_is_not_followed(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    os.symlink(outside, workspace / "inbox")
    prepared = await intake(workspace).prepare(
        inbound(Attachment("file", "x.bin", "application/octet-stream", b"\x00"))
    )
    assert "[file x.bin could not be saved:" in prepared.inbound.text
    assert list(outside.rglob("*")) == []


async def test_a_file_not_downloaded_is_named_with_its_size(tmp_path: Path) -> None:
    prepared = await intake(tmp_path).prepare(
        inbound(Attachment("file", "big.iso", "application/x-iso", None, 30_000_000), text="hi")
    )
    assert prepared.inbound.text == (
        "hi\n\n[file big.iso (30 MB) could not be downloaded; it may be over the size limit]"
    )


async def test_an_empty_transcript_gets_a_plain_answer(tmp_path: Path) -> None:
    async with FakeOpenAIAudio() as stt:
        stt.transcripts[b"silence"] = "  "
        transcriber = Transcriber(Endpoint(stt.base_url, stt.api_key, "whisper-1"))
        prepared = await intake(tmp_path, transcriber).prepare(
            inbound(Attachment("audio", "v", "audio/ogg", b"silence"))
        )
        assert prepared.notice.startswith("I couldn't hear any words")
        assert stt.requests[0].filename == "v.ogg"


async def test_a_wrong_key_is_reported_without_the_key(tmp_path: Path) -> None:
    async with FakeOpenAIAudio() as stt:
        transcriber = Transcriber(Endpoint(stt.base_url, "sk-wrong-key", "whisper-1"))
        prepared = await intake(tmp_path, transcriber).prepare(
            inbound(Attachment("audio", "v.ogg", "audio/ogg", b"x"))
        )
        assert "HTTP 401" in prepared.notice and "sk-wrong" not in prepared.notice


def test_transcription_must_name_an_openai_kind_provider(tmp_path: Path) -> None:
    from bot.media.chat import ChatMedia

    config = make_config(
        tmp_path, "http://127.0.0.1:9", {"media.transcription": {"provider": "nope"}}
    )
    with pytest.raises(ConfigError, match=r"media\.transcription\.provider: no provider 'nope'"):
        ChatMedia(config, {})
    config = make_config(
        tmp_path, "http://127.0.0.1:9", {"media.transcription": {"provider": "anthropic"}}
    )
    with pytest.raises(ConfigError, match="needs a provider of kind: openai"):
        ChatMedia(config, {})


async def test_transcription_config_reads_the_provider(tmp_path: Path) -> None:
    from bot.config.media import transcription_endpoint

    async with FakeOpenAIAudio() as stt:
        config = make_config(tmp_path, "http://127.0.0.1:9", transcription_config(stt))
        assert transcription_endpoint(config.media.transcription, config.providers) == Endpoint(
            stt.base_url, stt.api_key, "whisper-1"
        )


attachments = st.builds(
    Attachment,
    kind=st.sampled_from(["audio", "file"]),
    name=st.text(max_size=40),
    media_type=st.text(max_size=30),
    data=st.none() | st.binary(max_size=64),
    size=st.none() | st.integers(min_value=0, max_value=10**10),
    duration_s=st.none() | st.floats(min_value=0, max_value=1e6),
)


@given(st.lists(attachments, max_size=4))
def test_attachments_survive_the_inbox_payload(items: list[Attachment]) -> None:
    assert attachments_from_payload(attachments_to_payload(items)) == tuple(items)


@given(st.text(max_size=300))
def test_safe_names_are_plain_file_names(name: str) -> None:
    cleaned = _safe_name(name)
    assert cleaned and "/" not in cleaned and "\\" not in cleaned
    assert not cleaned.startswith(".") and len(cleaned) <= 120
    assert cleaned not in (".", "..")


@given(st.text(max_size=60), st.sampled_from(["audio/ogg", "audio/aac", "audio/x-m4a", "", "x/y"]))
def test_transcription_file_names_always_end_in_an_audio_extension(
    name: str, media_type: str
) -> None:
    assert audio_file_name(name, media_type).rpartition(".")[2].lower() in AUDIO_SUFFIXES


@given(st.text(max_size=8))
def test_slack_emoji_names_are_names_or_none(emoji: str) -> None:
    name = emoji_name(emoji)
    assert name is None or (name and ":" not in name.strip(":"))


def test_common_emoji_have_slack_names() -> None:
    assert [emoji_name(e) for e in ("👀", "👍", "❤️", ":parrot:", "tada", "🦜")] == [
        "eyes",
        "+1",
        "heart",
        "parrot",
        "tada",
        None,
    ]


async def test_a_steered_message_brings_its_file_as_text(tmp_path: Path) -> None:
    import asyncio
    import dataclasses

    from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
    from tests.fakes.chat import MemoryChannel
    from tests.harness import running_daemon
    from tests.waiting import eventually

    release = asyncio.Event()
    overrides = {
        "channels.telegram.dm_policy": "open",
        "channels.telegram.allow_from": ["*"],
        "agent.queue.mode": "steer",
    }
    chan = MemoryChannel("telegram")
    async with FakeAnthropic() as fake:
        fake.queue(
            Reply.tool_use([("list_dir", {"path": "."})], hold=release),
            Reply.text("done with both"),
        )
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await chan.say("list files")
            await fake.wait_requests(1, timeout=20)
            todo = Attachment("file", "todo.txt", "text/plain", b"buy milk")
            await chan.deliver(dataclasses.replace(chan.inbound("and this"), attachments=(todo,)))
            await eventually(
                lambda: any(
                    len(t.steer) for lane in daemon.gateway.lanes.values() for t in lane.active
                )
            )
            release.set()
            await chan.wait_sent(1)
            await daemon.gateway.wait_idle()
        asked = last_user_text(fake.requests[1])
    assert "[New message while you work]: and this\n\n[file todo.txt]\nbuy milk" in asked
