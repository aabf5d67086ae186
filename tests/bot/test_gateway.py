"""The gateway end to end: in-process chat channel -> real daemon -> fake Anthropic server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.hub.gateway import DROPPED_NOTICE
from bot.hub.inbox_payload import inbound_to_payload
from bot.hub.turns import EMPTY_REPLY
from bot.kernel.sessions import SessionKey
from bot.store.open import open_store
from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.waiting import eventually

GROUPS = {"channels.telegram.groups": ["g1"]}
OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def gated(fake: FakeAnthropic) -> asyncio.Event:
    """Make every model answer wait for the returned event (a slow model we control)."""
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    return gate


async def settle(daemon: Any) -> None:
    await asyncio.wait_for(daemon.gateway.wait_idle(), 5)


async def test_dm_gets_an_answer_with_typing_shown_while_it_runs(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("hello")
        assert await chan.wait_sent(1, timeout=30) == ["echo: hello"]
        # (stopped just after the reply is recorded as answered: tests/bot/test_answered_once.py)
        await eventually(lambda: chan.typing_active == 0)
        assert chan.typing_started == 1
    system = fake.requests[0]["system"]
    assert "Perch" in system[0]["text"] and system[0]["cache_control"]["type"] == "ephemeral"


async def test_conversation_survives_a_restart(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("my name is Ada")
        await chan.wait_sent(1)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("what is my name?")
        await chan.wait_sent(1)
    texts = [m["content"][-1].get("text") for m in fake.requests[-1]["messages"]]
    assert texts == ["my name is Ada", "echo: my name is Ada", "what is my name?"]


async def test_dm_burst_runs_one_turn_then_collects_the_rest_into_one(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        for text in ("one", "two", "three", "four"):
            await chan.say(text)
        await fake.wait_requests(1)
        assert fake.in_flight == 1
        gate.set()
        await chan.wait_sent(2)
        await settle(daemon)
    assert len(fake.requests) == 2
    follow_up = last_user_text(fake.requests[1])
    assert "3 messages arrived while you were busy" in follow_up
    assert follow_up.index("two") < follow_up.index("three") < follow_up.index("four")


async def test_group_runs_three_at_once_then_the_rest(tmp_path: Path, fake: FakeAnthropic) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    overrides = {**GROUPS, "agent.queue.mode": "followup"}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        for i in range(5):
            await chan.say(f"q{i}", chat_id="g1", sender=f"user{i}", group=True)
        await fake.wait_requests(3)
        await asyncio.sleep(0)  # let any (wrong) fourth run reach the server
        assert fake.in_flight == 3
        key = str(SessionKey.group("main", "telegram", "bot", "g1"))
        lane = daemon.gateway.lanes[key]
        assert (len(lane.active), len(lane.queue)) == (3, 2)
        gate.set()
        await chan.wait_sent(5)
        await settle(daemon)
    assert fake.max_in_flight == 3
    assert len(fake.requests) == 5


async def test_the_run_cap_bounds_model_work_not_delivery(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    # One run slot: the second chat waits for the first chat's model call, but not for its
    # answer to be delivered (a slow platform must not hold the model slot).
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    chan.hold = asyncio.Event()
    overrides = {**OPEN_DMS, "agent.max_concurrent_runs": 1}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("one", chat_id="u1")
        await chan.say("two", chat_id="u2")
        await fake.wait_requests(1)
        await asyncio.sleep(0)  # let any (wrong) second run reach the server
        assert fake.in_flight == 1
        gate.set()
        await fake.wait_requests(2)  # while "one"'s answer is still held by the platform
        assert chan.sent == []
        chan.hold.set()
        await chan.wait_sent(2)
        await settle(daemon)
    assert fake.max_in_flight == 1
    assert sorted(chan.texts()) == ["echo: one", "echo: two"]


async def test_stop_cancels_the_oldest_run_and_keeps_the_queue(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("first")
        await fake.wait_requests(1)
        await chan.say("second")
        await chan.say("/stop@perchbot")
        await chan.wait_sent(1)
        assert chan.texts()[0] == "Stopped."
        await fake.wait_requests(2)  # the queued message starts
        gate.set()
        await chan.wait_sent(2)
        await settle(daemon)
        assert chan.texts()[1] == "echo: second"
        # The stopped turn left a valid history: its user message is kept.
        store: Store = daemon.store  # type: ignore[assignment]
        session = await store.session(str(SessionKey.dm("main", "telegram", "bot", "u1")))
        roles = [m["role"] for m in await store.messages(session.id)]
        assert roles == ["user", "user", "assistant"]
        assert chan.typing_active == 0


async def test_stopall_cancels_every_group_run_and_drops_waiting_messages(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, GROUPS) as daemon:
        for i in range(5):
            await chan.say(f"q{i}", chat_id="g1", sender=f"user{i}", group=True)
        await fake.wait_requests(3)
        await chan.say("/stopall", chat_id="g1", sender="user0", group=True)
        assert await chan.wait_sent(1) == ["Stopped 3 runs."]
        await settle(daemon)
        gate.set()
        await chan.say("/stopall", chat_id="g1", sender="user0", group=True)
        await chan.wait_sent(2)
    assert chan.texts() == ["Stopped 3 runs.", "Nothing to stop."]
    assert len(fake.requests) == 3  # the two waiting messages never ran


async def test_unknown_dm_sender_gets_a_pairing_code_not_the_model(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}) as daemon:
        await chan.say("hi", chat_id="stranger")
        reply = (await chan.wait_sent(1))[0]
        store: Store = daemon.store  # type: ignore[assignment]
        [request] = await store.pairing_requests("telegram")
        assert request.code in reply and len(request.code) == 8
        assert not set(request.code) & set("01OI")
        await chan.say("/status", chat_id="stranger")  # commands of strangers are ignored
        await chan.say("hello again", chat_id="stranger")
        await chan.wait_sent(2)
        assert request.code in chan.texts()[1]  # the same code again, not a new one
        assert fake.requests == []
        assert await store.pairing_approve("telegram", request.code.lower()) is not None
        await chan.say("now?", chat_id="stranger")
        await chan.wait_sent(3)
        assert chan.texts()[2] == "echo: now?"


async def test_pairing_allows_three_pending_codes_per_channel(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}):
        for i in range(4):
            await chan.say("hi", chat_id=f"s{i}")
        await chan.wait_sent(3)  # each say() returns once the gateway has answered or not
    assert len(chan.sent) == 3
    assert {s.chat.chat_id for s in chan.sent} == {"s0", "s1", "s2"}


async def test_redelivered_update_is_answered_once(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("hello", message_id="42")
        await chan.say("hello", message_id="42")
        await chan.wait_sent(1)
        await settle(daemon)
    assert chan.texts() == ["echo: hello"]
    assert len(fake.requests) == 1


async def test_unmentioned_group_messages_become_context_for_the_next_mention(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, GROUPS) as daemon:
        await chan.say(
            "the meeting moved to 3pm", chat_id="g1", sender="bob", group=True, mentioned=False
        )
        await chan.say("when is the meeting?", chat_id="g1", sender="amy", group=True)
        await chan.wait_sent(1)
        await settle(daemon)
    assert len(fake.requests) == 1
    asked = last_user_text(fake.requests[0])
    assert "bob: the meeting moved to 3pm" in asked
    assert asked.endswith("[amy]: when is the meeting?")


async def test_groups_outside_the_allowlist_are_ignored(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, GROUPS) as daemon:
        await chan.say("hey bot", chat_id="g2", group=True)
        await chan.say("/stop", chat_id="g2", group=True)
        await settle(daemon)
    assert chan.sent == [] and fake.requests == []


async def test_steer_mode_injects_into_the_running_turn(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    release = asyncio.Event()
    fake.queue(
        Reply.tool_use([("list_dir", {"path": "."})], hold=release),
        Reply.text("done with both"),
    )
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.queue.mode": "steer"}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("list files")
        await fake.wait_requests(1)
        await chan.say("and be brief")
        release.set()
        await chan.wait_sent(1)
        await settle(daemon)
    assert len(fake.requests) == 2
    assert "[New message while you work]: and be brief" in last_user_text(fake.requests[1])


async def test_silent_reply_is_saved_but_not_sent(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.queue(Reply.text("NO_REPLY"))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("ok thanks")
        await settle(daemon)
        store: Store = daemon.store  # type: ignore[assignment]
        session = await store.session(str(SessionKey.dm("main", "telegram", "bot", "u1")))
        saved = await store.messages(session.id)
    assert chan.sent == []
    assert saved[-1]["content"][0]["text"] == "NO_REPLY"


@pytest.mark.parametrize("empty", ["", "  \n", "<think>nothing to say</think>"])
async def test_an_empty_answer_in_a_dm_is_explained_not_left_silent(
    tmp_path: Path, fake: FakeAnthropic, empty: str
) -> None:
    # Peers' users read a silent bot as a dead one; NO_REPLY stays the model's way to be quiet.
    fake.queue(Reply.text(empty))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("what now?")
        assert await chan.wait_sent(1) == [EMPTY_REPLY]


async def test_empty_answers_after_tools_or_in_groups_stay_silent(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.tool_use([("list_dir", {"path": "."})]), Reply.text(""), Reply.text(""))
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, **GROUPS}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("tidy up")  # the run used a tool: it may have done its job
        await fake.wait_requests(2)
        await settle(daemon)
        await chan.say("anyone?", chat_id="g1", sender="user1", group=True)
        await fake.wait_requests(3)
        await settle(daemon)
    assert chan.sent == []


async def test_a_long_file_written_is_cut_in_the_history_from_the_first_request_on(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    document = "# Report\n" + "A line of the long report.\n" * 8_000  # ~200 KB
    write = ("write_file", {"path": "report.md", "content": document})
    fake.queue(Reply.tool_use([write]), Reply.text("Saved."), Reply.text("You're welcome."))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("write the report")
        assert await chan.wait_sent(1) == ["Saved."]
        await chan.say("thanks")
        assert await chan.wait_sent(2) == ["Saved.", "You're welcome."]
        written = (daemon.config.workspace / "report.md").read_text()
    assert written == document  # the file is whole; only the history's copy is cut
    assert len(json.dumps(fake.requests[1])) < 40_000  # cut the first time it is sent ...
    call = [json.dumps(body["messages"][1]) for body in fake.requests[1:]]
    assert call[0] == call[1] and "left out of the history" in call[0]  # ... and kept so


async def test_model_failure_tells_the_user_plainly(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.queue(Reply.http_error(400, "invalid_request_error", "prompt is too long"))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("hello")
        [reply] = await chan.wait_sent(1, timeout=30)
    # a 400 is refused for good: the message leaves the history (tests/bot/test_rejected_requests.py)
    assert reply.startswith("The model API refused your message")
    assert "prompt is too long" in reply


async def test_unfinished_inbox_rows_are_rerun_or_answered_with_a_notice(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    fresh = chan.inbound("are you there?", chat_id="u1", message_id="7")
    stale = chan.inbound("old news", chat_id="u2", message_id="8")
    (tmp_path / "data").mkdir()
    store = await open_store(tmp_path / "data" / "perch.db")
    for inbound, received_at in ((fresh, time.time()), (stale, time.time() - 3600)):
        await store.inbox_add(
            "telegram",
            "bot",
            inbound.chat.chat_id,
            inbound.message_id,
            inbound_to_payload(inbound),
            received_at=received_at,
        )
    await store.close()
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.wait_sent(2)
        await settle(daemon)
        store2: Store = daemon.store  # type: ignore[assignment]
        assert await store2.inbox_pending() == []
    by_chat = {s.chat.chat_id: s.text for s in chan.sent}
    assert by_chat["u1"] == "echo: are you there?"
    assert "I restarted and lost your message" in by_chat["u2"]
    assert len(fake.requests) == 1


async def test_status_and_help_commands_answer_without_the_model(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("hello")
        await chan.wait_sent(1)
        await chan.say("/status")
        await chan.say("/help")
        await chan.wait_sent(3)
    status, help_text = chan.texts()[1:]
    assert "Model: claude-sonnet-5-5" in status and "2 messages" in status
    assert "/stopall" in help_text
    assert len(fake.requests) == 1


async def test_new_archives_and_reset_clears(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("remember 7")
        await chan.wait_sent(1)
        await chan.say("/new")
        await chan.wait_sent(2)
        await chan.say("what number?")
        await chan.wait_sent(3)
    assert [m["content"][-1]["text"] for m in fake.requests[-1]["messages"]] == ["what number?"]


async def test_interrupt_mode_stops_the_running_turn_and_answers_the_new_message(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.queue.mode": "interrupt"}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("write me an essay")
        await fake.wait_requests(1)
        await chan.say("never mind, just say hi")
        await fake.wait_requests(2)
        gate.set()
        await chan.wait_sent(1)
        await settle(daemon)
    assert chan.texts() == ["echo: never mind, just say hi"]


async def test_a_full_queue_drops_the_oldest_with_a_notice(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.queue": {"mode": "followup", "cap": 2}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("running")
        await fake.wait_requests(1)
        for text in ("w1", "w2", "w3", "w4"):
            await chan.say(text)
        # w1, then w2, are pushed out; the chat hears about it once.
        assert await chan.wait_sent(1) == [DROPPED_NOTICE]
        gate.set()
        await chan.wait_sent(4)
        await settle(daemon)
    assert chan.texts()[1:] == ["echo: running", "echo: w3", "echo: w4"]


def test_pairing_cli_lists_and_approves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.operator.cli import main
    from tests.harness import make_config

    config = make_config(tmp_path, "http://127.0.0.1:9")

    async def seed() -> str:
        from bot.hub.access import new_pairing_code
        from bot.store.rows import PairingRequest

        store = await open_store(config.db_path)
        code = new_pairing_code()
        now = time.time()
        await store.pairing_add(PairingRequest("telegram", code, "777", "Eve", now, now + 3600))
        await store.close()
        return code

    code = asyncio.run(seed())
    path = str(tmp_path / "config.yaml")
    assert main(["pairing", "list", "--config", path]) == 0
    assert f"telegram  {code}  777 (Eve)  expires in" in capsys.readouterr().out
    assert main(["pairing", "approve", "telegram", "NOPE2345", "--config", path]) == 1
    assert "No pending code NOPE2345" in capsys.readouterr().err
    assert main(["pairing", "approve", "telegram", code.lower(), "--config", path]) == 0
    assert "Approved 777 on telegram." in capsys.readouterr().out
    assert main(["pairing", "list", "--config", path]) == 0
    assert "No pending pairing requests." in capsys.readouterr().out


async def test_a_group_whose_context_is_crowded_runs_one_turn_at_a_time(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = asyncio.Event()
    fake.queue(Reply.text("noted", usage={"input_tokens": 7000, "output_tokens": 10}))
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    chan = MemoryChannel("telegram")
    overrides = {**GROUPS, "agent.queue.mode": "followup", "agent.context_window": 10000}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("here is a very long document", chat_id="g1", group=True)
        await chan.wait_sent(1)
        await settle(daemon)  # the turn's usage put the context over 60% of the window
        for i in range(3):
            await chan.say(f"q{i}", chat_id="g1", sender=f"user{i}", group=True)
        await fake.wait_requests(2)
        key = str(SessionKey.group("main", "telegram", "bot", "g1"))
        lane = daemon.gateway.lanes[key]
        assert (len(lane.active), len(lane.queue)) == (1, 2)
        gate.set()
        await chan.wait_sent(4)
        await settle(daemon)
    assert fake.max_in_flight == 1


async def test_a_message_arriving_during_shutdown_runs_after_the_restart(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = gated(fake)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("first")
        await fake.wait_requests(1)
        stopping = asyncio.create_task(daemon.stop())
        await asyncio.sleep(0)  # stop() turns intake off before it first waits
        assert daemon.gateway is not None and not daemon.gateway.accepting
        await chan.say("second, during shutdown")
        gate.set()
        await stopping  # (the context manager's own stop() is then a no-op)
    assert chan.texts() == ["echo: first"]
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.wait_sent(1)
    assert chan.texts() == ["echo: second, during shutdown"]
