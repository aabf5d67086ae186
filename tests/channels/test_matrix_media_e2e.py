"""Matrix media end to end against a real Synapse: an image to the model under the ack
reaction, a document into the turn, a file sent back by `send_file`, and an encrypted voice
message decrypted and transcribed."""

from __future__ import annotations

import io
from pathlib import Path

import nio
import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.openai_audio import FakeOpenAIAudio
from tests.matrix_daemon import alice, bot, daemon, model
from tests.matrix_server import MatrixUser, SynapseServer, synapse_server
from tests.matrix_support import Person
from tests.media_support import transcription_config, user_text

__all__ = ["alice", "bot", "model", "synapse_server"]  # fixtures, used by name

pytestmark = pytest.mark.timeout(120)


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d3b39a0000000049454e44ae426082"
)


async def test_an_image_reaches_the_model_under_an_ack_reaction_files_go_both_ways(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("the notes")
    model.queue(Reply.tool_use([("send_file", {"path": "notes.txt"})]), Reply.text("Sent."))
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id], ack_reaction="👀"),
        Person(synapse_server, alice, tmp_path / "alice") as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=False)
        mxc = await person.upload(PNG, "image/png", "dot.png")
        content = {
            "msgtype": "m.image",
            "body": "what is this?",
            "filename": "dot.png",
            "url": mxc,
            "info": {"mimetype": "image/png", "size": len(PNG)},
        }
        asked = await person.client.room_send(room, "m.room.message", content)
        assert isinstance(asked, nio.RoomSendResponse)
        await person.wait(lambda: f"👀 on {asked.event_id}" in person.reactions.values())
        await person.wait(lambda: person.texts(room) == ["Sent."])
        await person.wait(lambda: not person.reactions)  # taken off once answered
        blocks = model.requests[0]["messages"][-1]["content"]
        [image] = [b for b in blocks if b.get("type") == "image"]
        assert image["source"]["media_type"] == "image/png"
        assert "what is this?" in last_user_text(model.requests[0])
        [sent] = person.files
        assert sent["msgtype"] == "m.file" and sent["filename"] == "notes.txt"
        assert await person.download(sent["url"]) == b"the notes"

        plan = b"# Plan\n- ship it\n"
        mxc = await person.upload(plan, "text/markdown", "plan.md")
        document = {
            "msgtype": "m.file",
            "body": "plan.md",
            "url": mxc,
            "info": {"mimetype": "text/markdown", "size": len(plan)},
        }
        await person.client.room_send(room, "m.room.message", document)
        await person.wait(lambda: len(person.texts(room)) == 2)
        assert "[file plan.md]\n# Plan\n- ship it" in user_text(model.requests[-1])


async def test_an_encrypted_voice_message_is_decrypted_and_transcribed(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    voice = b"OggS" + bytes(range(200))
    async with FakeOpenAIAudio() as stt:
        stt.transcripts[voice] = "call mum at six"
        async with (
            daemon(
                tmp_path,
                model,
                synapse_server,
                bot,
                [alice.user_id],
                transcription_config(stt),
            ),
            Person(synapse_server, alice, tmp_path / "alice", encrypted=True) as person,
        ):
            room = await person.open_dm(bot.user_id, encrypted=True)
            uploaded, keys = await person.client.upload(
                io.BytesIO(voice), "audio/ogg", "voice.ogg", encrypt=True, filesize=len(voice)
            )
            assert isinstance(uploaded, nio.UploadResponse) and keys is not None
            content = {
                "msgtype": "m.audio",
                "body": "Voice message",
                "file": {**keys, "url": uploaded.content_uri},
                "info": {"mimetype": "audio/ogg", "size": len(voice), "duration": 2000},
                "org.matrix.msc3245.voice": {},
            }
            sent = await person.client.room_send(
                room, "m.room.message", content, ignore_unverified_devices=True
            )
            assert isinstance(sent, nio.RoomSendResponse)
            await person.wait(lambda: len(person.texts(room)) == 1)
            [request] = stt.requests
            assert request.data == voice  # what the homeserver held was ciphertext
            assert "[voice transcript] call mum at six" in user_text(model.requests[-1])


async def test_a_voice_message_is_answered_with_a_voice_message_and_its_text(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    voice = b"OggS" + bytes(range(100, 250))
    model.queue(Reply.text("Mum, six o'clock."))
    async with FakeOpenAIAudio() as audio:
        audio.transcripts[voice] = "when do I call mum"
        spoken = {**transcription_config(audio), "agent.voice": {"provider": "speech"}}
        async with (
            daemon(tmp_path, model, synapse_server, bot, [alice.user_id], spoken),
            Person(synapse_server, alice, tmp_path / "alice") as person,
        ):
            room = await person.open_dm(bot.user_id, encrypted=False)
            mxc = await person.upload(voice, "audio/ogg", "voice.ogg")
            content = {
                "msgtype": "m.audio",
                "body": "Voice message",
                "url": mxc,
                "info": {"mimetype": "audio/ogg", "size": len(voice), "duration": 2000},
                "org.matrix.msc3245.voice": {},
            }
            await person.client.room_send(room, "m.room.message", content)
            await person.wait(lambda: bool(person.files) and bool(person.texts(room)))
            [note] = person.files
            assert note["msgtype"] == "m.audio" and "org.matrix.msc3245.voice" in note
            assert note["info"]["mimetype"] == "audio/ogg" and note["info"]["duration"] > 0
            assert (await person.download(note["url"])).startswith(b"OggS")
            assert person.texts(room) == ["Mum, six o'clock."]
        assert [r.input for r in audio.speech_requests] == ["Mum, six o'clock."]
