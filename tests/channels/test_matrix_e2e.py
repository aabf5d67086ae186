"""Matrix end to end against a real Synapse: the whole daemon, matrix-nio on both sides, the
fake model. An unencrypted DM answered (edits, redactions and notices not), a stranger
paired, an invitation the policy refuses declined, an encrypted DM answered with a reply that
decrypts, a room mention answered in its thread (plain and encrypted rooms) while unmentioned
messages are context, /stop mid-reply with typing and read receipts, long replies in chunks
(also under a tight rate limit), a restart that answers nothing twice, a message that opens a
direct room, and `perch doctor`'s and `perch onboard`'s live checks. Skipped, saying why,
where there is no Synapse (`make synapse` makes one)."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import aiohttp
import nio
import pytest
import yaml

from bot.operator.cli import main
from bot.operator.doctor import run_checks
from channels.base import ChatRef, Outbound
from channels.chunking import parse_fence
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.harness import make_config
from tests.matrix_daemon import alice, bot, daemon, matrix_settings, model
from tests.matrix_server import MatrixUser, SynapseServer, limit_messages, register, synapse_server
from tests.matrix_support import Person

__all__ = ["alice", "bot", "model", "synapse_server"]  # fixtures, used by name

pytestmark = pytest.mark.timeout(120)


async def test_an_unencrypted_dm_is_answered(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]),
        Person(synapse_server, alice, tmp_path / "alice") as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=False)
        first = await person.say(room, "hello bot")
        await person.wait(lambda: person.texts(room) == ["echo: hello bot"])
        assert not person.shown[room][0].encrypted
        edit = {"rel_type": "m.replace", "event_id": first}
        new = {"msgtype": "m.text", "body": "hello bot!"}
        await person.say(room, "* hello bot!", **{"m.new_content": new, "m.relates_to": edit})
        await person.client.room_redact(room, first)
        await person.client.room_send(
            room, "m.room.message", {"msgtype": "m.notice", "body": "a bot"}
        )
        await person.say(room, "still there?")  # edits, redactions and notices are not answered
        await person.wait(lambda: len(person.texts(room)) == 2)
        assert person.texts(room) == ["echo: hello bot", "echo: still there?"]
        assert len(model.requests) == 2


async def test_an_invitation_the_access_policy_refuses_is_declined(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    stranger = register(synapse_server, "eve", "Eve")
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]),
        Person(synapse_server, stranger, tmp_path / "eve") as person,
    ):
        room = await person.open_room("not listed", [bot.user_id])
        await person.wait(lambda: (room, bot.user_id, "leave") in person.memberships)
        dm = await person.client.room_create(is_direct=True, invite=[bot.user_id])
        assert isinstance(dm, nio.RoomCreateResponse)  # dm_policy allowlist: declined too
        await person.wait(lambda: (dm.room_id, bot.user_id, "leave") in person.memberships)
        assert (room, bot.user_id, "join") not in person.memberships


async def test_a_stranger_gets_a_pairing_code_and_the_owner_is_told(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    eve = register(synapse_server, "eve", "Eve")
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id], dm_policy="pairing"),
        Person(synapse_server, alice, tmp_path / "alice") as owner,
        Person(synapse_server, eve, tmp_path / "eve") as stranger,
    ):
        mine = await owner.open_dm(bot.user_id, encrypted=False)
        room = await stranger.open_dm(bot.user_id, encrypted=False)
        await stranger.say(room, "who are you?")
        await stranger.wait(lambda: len(stranger.texts(room)) == 1)
        assert "pairing code" in stranger.texts(room)[0]
        await owner.wait(
            lambda: any("perch pairing approve matrix" in t for t in owner.texts(mine))
        )
        assert model.requests == []


async def test_an_encrypted_dm_is_answered_and_the_reply_decrypts(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]),
        Person(synapse_server, alice, tmp_path / "alice", encrypted=True) as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=True)
        await person.say(room, "a secret hello")
        await person.wait(lambda: person.texts(room) == ["echo: a secret hello"])
        assert person.shown[room][0].encrypted  # it came encrypted and decrypted here
        assert person.undecryptable == []
        assert last_user_text(model.requests[0]) == "a secret hello"
    assert list((tmp_path / "data" / "matrix").glob("*/*.db")), "the crypto store is in state"


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_room_mention_is_answered_in_its_thread_and_the_rest_is_context(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
    encrypted: bool,
) -> None:
    bob = register(synapse_server, "bob", "Bob")
    async with (
        Person(synapse_server, alice, tmp_path / "alice", encrypted=encrypted) as person,
        Person(synapse_server, bob, tmp_path / "bob", encrypted=encrypted) as other,
    ):
        person.watch(bot.user_id)
        room = await person.open_room("lunch", [bot.user_id, bob.user_id], encrypted=encrypted)
        await other.join(room)
        async with daemon(tmp_path, model, synapse_server, bot, [alice.user_id], groups=[room]):
            await person.wait(lambda: person.joined(room, bot.user_id))
            await other.say(room, "lunch is at noon")  # not addressed: context only
            asked = await person.say(
                room, "Perch: when is lunch?", **{"m.mentions": {"user_ids": [bot.user_id]}}
            )
            await person.wait(lambda: len(person.texts(room)) == 1)
            [answer] = person.shown[room]
            assert answer.relation["rel_type"] == "m.thread"
            assert answer.encrypted is encrypted
            assert answer.relation["event_id"] == asked
            asked_text = last_user_text(model.requests[0])
            assert "lunch is at noon" in asked_text and asked_text.endswith("when is lunch?")
            assert answer.text == "echo: " + asked_text

            thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": asked}}
            await person.say(room, "and dessert?", **thread)  # in its thread: no mention needed
            await person.wait(lambda: len(person.texts(room)) == 2)
            assert person.shown[room][1].relation["event_id"] == asked
            history = str(model.requests[-1]["messages"])  # one session per thread
            assert "when is lunch?" in history
            await other.say(room, "anyone for coffee?")  # unmentioned, outside the thread
            await person.say(room, "Perch: thanks", **{"m.mentions": {"user_ids": [bot.user_id]}})
            await person.wait(lambda: len(person.texts(room)) == 3)
            assert len(model.requests) == 3
            reply = {"m.relates_to": {"m.in_reply_to": {"event_id": answer.event_id}}}
            await other.say(room, "is that so?", **reply)  # a reply to the bot addresses it
            await person.wait(lambda: len(person.texts(room)) == 4)
            assert last_user_text(model.requests[-1]).endswith("is that so?")


async def test_stop_mid_reply_stops_it_and_typing_and_read_receipts_show(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    model.queue(Reply.stall("I am thinking about this at length", chunk=4))
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]),
        Person(synapse_server, alice, tmp_path / "alice") as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=False)
        asked = await person.say(room, "tell me everything")
        await person.wait(lambda: any("thinking" in t for t in person.texts(room)))
        await person.wait(lambda: (room, True) in person.typing and asked in person.read)
        await person.say(room, "/stop")
        await person.wait(lambda: "Stopped." in person.texts(room))
        await person.wait(lambda: person.typing[-1] == (room, False))  # typing ends with the run
        await person.say(room, "/stop")
        await person.wait(lambda: "Nothing to stop." in person.texts(room))
        assert len(model.requests) == 1  # commands never reach the model


async def test_a_long_reply_arrives_in_order_in_balanced_chunks(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    code = "```python\n" + "\n".join(f"step({i})  # one step of the work" for i in range(400))
    answer = "Here is the script:\n\n" + code + "\n```\n\nRun it twice."
    model.queue(Reply.text(answer, chunk=500))
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]),
        Person(synapse_server, alice, tmp_path / "alice") as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=False)
        await person.say(room, "write the script")
        await person.wait(lambda: "".join(person.texts(room)).endswith("Run it twice."))
        chunks = person.texts(room)
        assert len(chunks) >= 3
        assert all(len(chunk) <= 4000 for chunk in chunks)
        for chunk in chunks:
            fence = None
            for line in chunk.split("\n"):
                fence = (
                    parse_fence(line) if fence is None else (None if fence.closes(line) else fence)
                )
            assert fence is None, chunk[-200:]
        steps = [
            int(line.split("(")[1].split(")")[0])
            for line in "\n".join(chunks).split("\n")
            if line.startswith("step(")
        ]
        assert steps == list(range(400))


async def test_a_long_reply_under_a_tight_rate_limit_still_arrives_whole_and_in_order(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "nio")
    admin = register(synapse_server, "admin", admin=True)
    limit_messages(synapse_server, admin, bot.user_id, per_second=2, burst=2)
    paragraphs = [f"Paragraph {i}: " + "words " * 150 for i in range(6)]
    model.queue(Reply.text("\n\n".join(paragraphs), chunk=300))
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id], chunk_limit=1000),
        Person(synapse_server, alice, tmp_path / "alice") as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=False)
        await person.say(room, "tell me a lot")
        await person.wait(lambda: "Paragraph 5" in "".join(person.texts(room)), 60)
        numbers = re.findall(r"Paragraph (\d+):", "\n".join(person.texts(room)))
        assert numbers == [str(i) for i in range(6)]  # each once, in order
        assert len(person.texts(room)) >= 6  # more messages than the burst allows at once
    assert "429" in caplog.text  # the homeserver did refuse some, and they were sent again


async def test_a_restart_answers_what_came_while_down_and_nothing_twice_as_the_same_device(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    by_password = {"access_token": "", "password": bot.password}  # the device is kept
    async with Person(synapse_server, alice, tmp_path / "alice", encrypted=True) as person:
        async with daemon(tmp_path, model, synapse_server, bot, [alice.user_id], **by_password):
            room = await person.open_dm(bot.user_id, encrypted=True)
            await person.say(room, "one")
            await person.wait(lambda: person.texts(room) == ["echo: one"])
        await person.say(room, "two")  # sent while Perch is down
        async with daemon(tmp_path, model, synapse_server, bot, [alice.user_id], **by_password):
            await person.wait(lambda: person.texts(room) == ["echo: one", "echo: two"])
            await person.say(room, "three")
            await person.wait(lambda: len(person.texts(room)) == 3)
        assert person.texts(room) == ["echo: one", "echo: two", "echo: three"]
        assert [last_user_text(r) for r in model.requests] == ["one", "two", "three"]
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{synapse_server.url}/_matrix/client/v3/devices",
            headers={"Authorization": f"Bearer {bot.access_token}"},
        ) as response,
    ):
        devices = (await response.json())["devices"]
    # the registration's, and the one Perch logged in once and came back as
    assert sorted(d.get("display_name") or "" for d in devices) == ["", "Perch"]


async def test_a_message_to_someone_without_a_room_opens_an_encrypted_direct_room(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id]) as running,
        Person(synapse_server, alice, tmp_path / "alice", encrypted=True) as person,
    ):
        person.watch(bot.user_id)
        chat = ChatRef("matrix", bot.user_id, "dm", alice.user_id)
        await running.channels["matrix"].send(Outbound(chat, "Your **reminder**: call mum"))
        await person.wait(lambda: len(person.invited) == 1)
        [room] = person.invited
        await person.wait(lambda: person.texts(room) == ["Your **reminder**: call mum"])
        assert person.shown[room][0].encrypted


async def test_doctor_checks_the_token_live(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
) -> None:
    settings = matrix_settings(synapse_server, bot, [alice.user_id])
    [check] = [
        c
        for c in await run_checks(make_config(tmp_path, model.base_url, settings))
        if c.name == "matrix"
    ]
    assert check.ok, check.line()
    assert bot.user_id in check.line() and bot.device_id in check.line()

    settings["channels.matrix"]["access_token"] = "syt_not_a_real_token_at_all"
    [check] = [
        c
        for c in await run_checks(make_config(tmp_path, model.base_url, settings))
        if c.name == "matrix"
    ]
    assert not check.ok
    assert "401" in check.line() and "MATRIX_ACCESS_TOKEN" in check.line()


async def test_onboard_sets_matrix_up_and_checks_the_token_live(
    tmp_path: Path,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = "sk-ant-onboard-matrix"
    config, env_file = tmp_path / "config.yaml", tmp_path / "perch.env"
    async with FakeAnthropic(api_key=key) as model_server:
        code = await asyncio.to_thread(
            main,
            [
                *("onboard", "--config", str(config), "--yes", "--no-doctor"),
                *("--api-key", key, "--base-url", model_server.base_url),
                *("--channels", "matrix"),
                *("--env", f"MATRIX_HOMESERVER={synapse_server.url}"),
                *("--env", f"MATRIX_USER_ID={bot.user_id}"),
                *("--env", f"MATRIX_ACCESS_TOKEN={bot.access_token}"),
                *("--owner", f"matrix:{alice.user_id}", "--secrets-path", str(env_file)),
                *("--secrets", "env"),
            ],
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"OK    matrix: {bot.user_id} (device {bot.device_id}) is reachable" in out
    data = yaml.safe_load(config.read_text())["channels"]["matrix"]
    assert data["enabled"] is True and data["allow_from"] == [alice.user_id]
    assert data["access_token"] == "${MATRIX_ACCESS_TOKEN:-}"
    assert f"MATRIX_ACCESS_TOKEN={bot.access_token}" in env_file.read_text()
    assert bot.access_token not in config.read_text()
