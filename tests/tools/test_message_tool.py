"""The `message` tool: the agent reaches the chats the policy allows, and no others."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.tools.base import ToolContext, ToolError
from agents.tools.message import MessageTool
from bot.config.schema import Config
from bot.kernel.ports import Outbox
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from bot.store.rows import PairingRequest
from bot.tools.messages import ChatMessenger, TargetPolicy, TargetRefused
from channels.base import ChatRef
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

POLICY = {
    "channels.telegram.allow_from": ["42"],
    "channels.telegram.groups": ["g1"],
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def message(text: str, to: str | None = None) -> tuple[str, dict[str, Any]]:
    return ("message", {"text": text} if to is None else {"text": text, "to": to})


async def approve(store: Store, channel: str, sender: str) -> None:
    now = time.time()
    await store.pairing_add(PairingRequest(channel, "ABCDEFGH", sender, "", now, now + 60))
    assert await store.pairing_approve(channel, "ABCDEFGH") is not None


async def test_message_reaches_allowed_chats_and_refuses_the_rest(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(
        Reply.tool_use(
            [
                message("to this chat"),
                message("to the owner", "owner"),
                message("to the group", "telegram:group:g1"),
                message("to a paired user", "telegram:77"),
                message("to a stranger", "telegram:999"),
                message("to another group", "telegram:group:g2"),
                message("to a channel not running", "slack:42"),
                message("nonsense target", "somewhere"),
            ]
        ),
        Reply.text("done"),
    )
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, POLICY) as daemon:
        store: Store = daemon.store  # type: ignore[assignment]
        await approve(store, "telegram", "77")
        await chan.say("tell everyone", chat_id="42", sender="42")  # the owner
        texts = await chan.wait_sent(5, timeout=60)
    assert texts[-1] == "done"
    delivered = {(s.chat.kind, s.chat.chat_id, s.text) for s in chan.sent[:-1]}
    assert delivered == {
        ("dm", "42", "to this chat"),
        ("dm", "42", "to the owner"),
        ("group", "g1", "to the group"),
        ("dm", "77", "to a paired user"),
    }
    results = [b for b in fake.requests[1]["messages"][-1]["content"]]
    sent, refused = results[:4], results[4:]
    assert [r["content"] for r in sent] == [
        "Sent to telegram:42.",
        "Sent to telegram:42.",
        "Sent to telegram:group:g1.",
        "Sent to telegram:77.",
    ]
    assert all(r.get("is_error") for r in refused)
    for r in refused[:2]:
        assert "is not a chat I may message" in r["content"] and "'owner'" in r["content"]
    assert "unknown or disabled channel 'slack'" in refused[2]["content"]
    assert "not a chat address" in refused[3]["content"]
    session = str(SessionKey.dm("main", "telegram", "bot", "42"))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(session in w and "telegram:999" in w for w in warnings)


async def test_a_person_other_than_the_owner_reaches_only_their_own_chat(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(
        Reply.tool_use(
            [
                message("to this chat"),
                message("to the owner", "owner"),
                message("to the owner by id", "telegram:42"),
                message("to the group", "telegram:group:g1"),
                message("to another paired user", "telegram:78"),
            ]
        ),
        Reply.text("done"),
    )
    chan = MemoryChannel("telegram")
    policy = {**POLICY, "channels.telegram.allow_from": ["42", "43"]}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, policy) as daemon:
        store: Store = daemon.store  # type: ignore[assignment]
        await approve(store, "telegram", "78")
        await chan.say("tell everyone", chat_id="43", sender="43")  # allowed, not the owner
        texts = await chan.wait_sent(2, timeout=60)
    assert texts[-1] == "done"
    assert [(s.chat.chat_id, s.text) for s in chan.sent[:-1]] == [("43", "to this chat")]
    results = fake.requests[1]["messages"][-1]["content"]
    assert results[0]["content"] == "Sent to telegram:43."
    for refused in results[1:]:
        assert refused.get("is_error") and "only its own chat" in refused["content"]


async def test_a_run_without_a_chat_must_name_its_target(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, POLICY) as daemon:
        store: Store = daemon.store  # type: ignore[assignment]
        tool = MessageTool(
            ChatMessenger(
                daemon.config, store, Outbox(daemon.channels), people=daemon.parts.cron.people
            )
        )
        ctx = ToolContext(workspace=tmp_path, session_key="agent:main:heartbeat")
        with pytest.raises(ToolError, match="no current chat"):
            await tool.run({"text": "report"}, ctx)
        result = await tool.run({"text": "report", "to": "owner"}, ctx)
        with pytest.raises(ToolError, match="NO_REPLY"):
            await tool.run({"text": "NO_REPLY", "to": "owner"}, ctx)
    assert result.content == "Sent to telegram:42."
    assert [(s.chat.chat_id, s.text) for s in chan.sent] == [("42", "report")]


# -- the pure policy ------------------------------------------------------------------------

CONFIG = Config.model_validate(
    {
        "channels": {
            "console": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token": "1:t",
                "dm_policy": "open",
                "allow_from": ["*", "42"],
                "groups": ["*", "g1"],
            },
            "slack": {"enabled": True, "bot_token": "b", "app_token": "a", "allow_from": []},
        }
    }
)
POLICY_UNDER_TEST = TargetPolicy.from_config(
    CONFIG, {"telegram": MemoryChannel("telegram"), "slack": MemoryChannel("slack", account="T1")}
)
CURRENT = ChatRef("slack", "T1", "group", "C9", "1700.1")

targets = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda channel, kind, chat, thread: f"{channel}:{kind}{chat}{thread}",
        st.sampled_from(["telegram", "slack", "signal", "console", "sub", ""]),
        st.sampled_from(["", "dm:", "group:"]),
        st.sampled_from(["42", "g1", "*", "C9", "999", "", "42:x"]),
        st.sampled_from(["", ":1700.1", ":t"]),
    ),
    st.sampled_from(["owner", "current", "OWNER", " current "]),
)


@given(targets)
def test_policy_never_allows_a_chat_outside_the_lists(target: str) -> None:
    try:
        chat = POLICY_UNDER_TEST.resolve(target, CURRENT)
    except TargetRefused:
        return
    verdict = POLICY_UNDER_TEST.verdict(chat, CURRENT)
    listed = (chat.channel, chat.kind, chat.chat_id) in {
        ("telegram", "dm", "42"),
        ("telegram", "group", "g1"),
        ("slack", "group", "C9"),
    }
    if verdict == "allow":
        assert listed
    elif verdict == "if_approved":  # only a DM on a chat platform, decided by pairing
        assert chat.kind == "dm" and chat.channel in ("telegram", "slack")
    assert chat.chat_id != "*" or verdict != "allow"


def test_owner_is_the_first_real_allow_from_id() -> None:
    owner = POLICY_UNDER_TEST.resolve("owner", None)
    assert owner == ChatRef("telegram", "bot", "dm", "42")
    assert POLICY_UNDER_TEST.verdict(owner, None) == "allow"


def test_every_allowed_id_is_reachable_though_only_the_first_is_the_owner() -> None:
    config = Config.model_validate({"channels": {"telegram": {"allow_from": ["42", "43", "*"]}}})
    policy = TargetPolicy.from_config(config, {"telegram": MemoryChannel("telegram")})
    assert policy.resolve("owner", None) == ChatRef("telegram", "bot", "dm", "42")
    assert policy.verdict(ChatRef("telegram", "bot", "dm", "43"), None) == "allow"
    assert policy.verdict(ChatRef("telegram", "bot", "dm", "44"), None) == "if_approved"
