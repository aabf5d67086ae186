"""Session keys: every form of DESIGN.md section 2, escaping, validation and the round trip."""

from __future__ import annotations

import itertools
import re
from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sessions import MAX_DEPTH, MAX_KEY_CHARS, RESERVED_CHANNELS, SessionKey
from channels.base import ChatRef

SIGNAL_GROUP = "aB/c+d=:e%f=="  # base64 with '/', '+', '=' plus ':' and '%' thrown in
SLACK_TS = "1712345678.123456"

TELEGRAM_DM = SessionKey.dm("main", "telegram", "default", "123456789")
SLACK_THREAD = SessionKey.group("main", "slack", "T01", "C024BE91L", SLACK_TS)
SUB_1 = SessionKey.sub(SLACK_THREAD, "a1")
SUB_2 = SessionKey.sub(SUB_1, "b:2")
SUB_3 = SessionKey.sub(SUB_2, "c%3")

FORMS = [
    pytest.param(TELEGRAM_DM, "agent:main:telegram:default:dm:123456789", id="telegram-dm"),
    pytest.param(
        SessionKey.dm("main", "telegram", "default", "-100123", thread="42"),
        "agent:main:telegram:default:dm:-100123:thread:42",
        id="dm-thread",
    ),
    pytest.param(
        SessionKey.group("main", "telegram", "default", "-1001234567890", thread="7"),
        "agent:main:telegram:default:group:-1001234567890:thread:7",
        id="telegram-forum-topic",
    ),
    pytest.param(
        SessionKey.group("main", "signal", "+4915112345678", SIGNAL_GROUP),
        "agent:main:signal:+4915112345678:group:aB/c+d=%3Ae%25f==",
        id="signal-base64-group",
    ),
    pytest.param(
        SessionKey.group("main", "slack", "T01", "C024BE91L"),
        "agent:main:slack:T01:group:C024BE91L",
        id="slack-channel",
    ),
    pytest.param(
        SLACK_THREAD,
        "agent:main:slack:T01:group:C024BE91L:thread:1712345678.123456",
        id="slack-thread",
    ),
    pytest.param(
        SessionKey.dm("ops:bot", "console", "local", "%3A"),
        "agent:ops%3Abot:console:local:dm:%253A",
        id="escaped-agent-and-escape-lookalike-peer",
    ),
    pytest.param(
        SUB_1,
        "agent:main:sub:1:a1:agent:main:slack:T01:group:C024BE91L:thread:1712345678.123456",
        id="sub-depth-1",
    ),
    pytest.param(
        SUB_2,
        "agent:main:sub:2:b%3A2:agent:main:sub:1:a1:"
        "agent:main:slack:T01:group:C024BE91L:thread:1712345678.123456",
        id="sub-depth-2",
    ),
    pytest.param(
        SUB_3,
        "agent:main:sub:3:c%253:agent:main:sub:2:b%3A2:agent:main:sub:1:a1:"
        "agent:main:slack:T01:group:C024BE91L:thread:1712345678.123456",
        id="sub-depth-3",
    ),
    pytest.param(SessionKey.cron("main", "daily:09"), "agent:main:cron:daily%3A09", id="cron"),
    pytest.param(SessionKey.heartbeat("main"), "agent:main:heartbeat", id="heartbeat"),
]


@pytest.mark.parametrize(("key", "text"), FORMS)
def test_each_form_formats_to_the_documented_string(key: SessionKey, text: str) -> None:
    assert str(key) == text


@pytest.mark.parametrize(("key", "text"), FORMS)
def test_each_form_parses_back_to_an_equal_key(key: SessionKey, text: str) -> None:
    parsed = SessionKey.parse(text)
    assert parsed == key
    assert hash(parsed) == hash(key)
    assert str(parsed) == text


def test_signal_group_id_survives_with_every_character() -> None:
    key = SessionKey.parse("agent:main:signal:+4915112345678:group:aB/c+d=%3Ae%25f==")
    assert key.chat_id == SIGNAL_GROUP
    assert key.is_group
    assert key.kind == "group"


def test_slack_thread_key_exposes_thread_and_its_chat_key() -> None:
    key = SessionKey.parse("agent:main:slack:T01:group:C024BE91L:thread:1712345678.123456")
    assert key.thread_id == SLACK_TS
    assert key.chat_key == SessionKey.group("main", "slack", "T01", "C024BE91L")
    assert str(key.chat_key) == "agent:main:slack:T01:group:C024BE91L"


@pytest.mark.parametrize("key", [TELEGRAM_DM, SUB_2, SessionKey.heartbeat("main")])
def test_chat_key_of_a_key_without_thread_is_the_key_itself(key: SessionKey) -> None:
    assert key.chat_key is key


def test_nested_sub_keys_know_depth_parent_and_root() -> None:
    key = SessionKey.parse(str(SUB_3))
    assert [key.depth, key.parent and key.parent.depth] == [3, 2]
    assert key.kind == "sub"
    assert key.spawn_id == "c%3"
    assert key.parent == SUB_2
    assert key.parent.parent == SUB_1
    assert key.parent.parent.parent == SLACK_THREAD
    assert key.root == SLACK_THREAD
    assert key.agent == "main"
    assert not key.is_group
    assert key.root.is_group


@pytest.mark.parametrize(
    ("key", "kind", "is_group"),
    [
        (TELEGRAM_DM, "dm", False),
        (SLACK_THREAD, "group", True),
        (SUB_1, "sub", False),
        (SessionKey.cron("main", "j"), "cron", False),
        (SessionKey.heartbeat("main"), "heartbeat", False),
    ],
)
def test_kind_and_is_group_per_form(key: SessionKey, kind: str, is_group: bool) -> None:
    assert key.kind == kind
    assert key.is_group is is_group


@pytest.mark.parametrize(
    "key", [TELEGRAM_DM, SLACK_THREAD, SessionKey.cron("m", "j"), SessionKey.heartbeat("m")]
)
def test_non_sub_keys_have_depth_zero_no_parent_and_are_their_own_root(key: SessionKey) -> None:
    assert key.depth == 0
    assert key.parent is None
    assert key.root is key


def test_sub_takes_agent_from_parent_and_sits_one_level_deeper() -> None:
    parent = SessionKey.cron("night", "backup")
    child = SessionKey.sub(parent, "s1")
    assert (child.agent, child.depth, child.parent) == ("night", 1, parent)


def test_siblings_with_different_spawn_ids_are_different_sessions() -> None:
    assert SessionKey.sub(TELEGRAM_DM, "a") != SessionKey.sub(TELEGRAM_DM, "b")
    assert len({SessionKey.sub(TELEGRAM_DM, "a"), SessionKey.sub(TELEGRAM_DM, "a")}) == 1


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (
            ChatRef("telegram", "default", "dm", "42", reply_to="9"),
            "agent:main:telegram:default:dm:42",
        ),
        (
            ChatRef("slack", "T01", "group", "C1", thread_id=SLACK_TS),
            f"agent:main:slack:T01:group:C1:thread:{SLACK_TS}",
        ),
    ],
)
def test_for_chat_builds_the_key_from_a_channel_chat_ref(ref: ChatRef, expected: str) -> None:
    assert str(SessionKey.for_chat("main", ref)) == expected


def test_repr_shows_the_parseable_string() -> None:
    assert repr(SessionKey.heartbeat("main")) == "SessionKey.parse('agent:main:heartbeat')"


def test_keys_are_immutable() -> None:
    with pytest.raises(AttributeError):
        TELEGRAM_DM.agent = "other"  # type: ignore[misc]


MALFORMED = [
    ("", "must start with 'agent:'"),
    ("session:main:heartbeat", "must start with 'agent:'"),
    ("agent", "ends before saying which kind of key"),
    ("agent:main", "ends before saying which kind of key"),
    ("agent::heartbeat", "<agentId> is empty"),
    ("agent:main:heartbeat:x", "heartbeat key ends after 'heartbeat', got extra 'x'"),
    ("agent:main:cron", "cron key is exactly agent:<agentId>:cron:<jobId>"),
    ("agent:main:cron:", "<jobId> is empty"),
    ("agent:main:cron:daily:09", "escape ':' as %3A"),
    ("agent:main:telegram:default", "chat key needs <channel>:<accountId>:dm|group:<chatId>"),
    ("agent:main:telegram:default:chat:1", "expected 'dm' or 'group' after the <accountId>"),
    ("agent:main::default:dm:1", "<channel> is empty"),
    ("agent:main:telegram::dm:1", "<accountId> is empty"),
    ("agent:main:telegram:default:dm:", "<peerId> is empty"),
    ("agent:main:signal:+49:group:", "<groupId> is empty"),
    ("agent:main:slack:T01:group:C1:thread", "only ':thread:<threadId>' may follow"),
    ("agent:main:slack:T01:group:C1:topic:1", "only ':thread:<threadId>' may follow"),
    ("agent:main:slack:T01:group:C1:thread:", "<threadId> is empty"),
    ("agent:main:slack:T01:group:C1:thread:1:2", "only ':thread:<threadId>' may follow"),
    ("agent:main:signal:+49:group:aB/c+d=:e==", "only ':thread:<threadId>' may follow"),
    ("agent:main:telegram:default:dm:1%3a", "'%3a', which is not an escape"),
    ("agent:main:telegram:default:dm:1%", "'%', which is not an escape"),
    ("agent:main:telegram:default:dm:%41", "'%41', which is not an escape"),
    ("agent:main:sub:1:s", "needs <depth>:<spawnId>:<parentKey> after 'sub'"),
    ("agent:main:sub:0:s:agent:main:heartbeat", "whole number >= 1 with no leading zeros"),
    ("agent:main:sub:01:s:agent:main:heartbeat", "got '01'"),
    ("agent:main:sub:-1:s:agent:main:heartbeat", "got '-1'"),
    ("agent:main:sub:x:s:agent:main:heartbeat", "got 'x'"),
    ("agent:main:sub:1::agent:main:heartbeat", "<spawnId> is empty"),
    ("agent:main:sub:2:s:agent:main:heartbeat", "depth 2 does not match its parent's depth 0"),
    ("agent:main:sub:99999999999999:s:agent:main:heartbeat", f"limit of {MAX_DEPTH}"),
    ("agent:main:sub:1:s:agent:other:heartbeat", "agent 'main' differs from its parent's"),
    ("agent:main:sub:1:s:heartbeat", "in the nested key 'heartbeat'"),
    ("agent:main:sub:1:s:agent:main:sub:1:t", "in the nested key 'agent:main:sub:1:t'"),
    (
        "agent:main:sub:2:s:agent:main:sub:2:t:agent:main:heartbeat",
        "in the nested key 'agent:main:sub:2:t:agent:main:heartbeat'): the sub-agent depth 2",
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_keys_are_rejected_with_a_message_naming_the_problem(
    text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        SessionKey.parse(text)
    assert str(raised.value).startswith(f"malformed session key {text!r}")


def test_parse_of_a_non_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="must be a str, got bytes"):
        SessionKey.parse(b"agent:main:heartbeat")  # type: ignore[arg-type]


def test_error_for_a_huge_key_quotes_only_its_beginning() -> None:
    text = "agent:main:telegram:default:dm:" + "x" * 10_000 + ":oops"
    with pytest.raises(ValueError, match=r"\.\.\. \(10036 chars\)") as raised:
        SessionKey.parse(text)
    assert len(str(raised.value)) < 1_000


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: SessionKey.dm("main", "telegram", "default", ""), ValueError, "chat_id is empty"),
        (lambda: SessionKey.dm("", "telegram", "d", "1"), ValueError, "agent is empty"),
        (lambda: SessionKey.group("m", "slack", "T", "C", ""), ValueError, "thread_id is empty"),
        (lambda: SessionKey.cron("main", ""), ValueError, "job_id is empty"),
        (lambda: SessionKey.sub(TELEGRAM_DM, ""), ValueError, "spawn_id is empty"),
        (lambda: SessionKey.dm("m", "cron", "d", "1"), ValueError, "'cron' is reserved"),
        (lambda: SessionKey.group("m", "sub", "d", "1"), ValueError, "'sub' is reserved"),
        (
            lambda: SessionKey.dm("m", "telegram", "d", 42),  # type: ignore[arg-type]
            TypeError,
            "chat_id must be a str, got int 42; convert platform ids with str()",
        ),
        (lambda: SessionKey("m", "dm"), ValueError, "needs account, channel, chat_id"),
        (lambda: SessionKey("m", "sub", spawn_id="s"), ValueError, "sub session key needs parent"),
        (
            lambda: SessionKey("m", "heartbeat", job_id="j"),
            ValueError,
            "heartbeat session key cannot have job_id",
        ),
        (
            lambda: SessionKey("m", "cron", job_id="j", channel="telegram"),
            ValueError,
            "cron session key cannot have channel",
        ),
        (
            lambda: SessionKey("m", "chat"),  # type: ignore[arg-type]
            ValueError,
            "kind 'chat' is unknown",
        ),
        (
            lambda: SessionKey("other", "sub", spawn_id="s", parent=TELEGRAM_DM),
            ValueError,
            "agent 'other' must match its parent's agent 'main'",
        ),
    ],
)
def test_invalid_keys_cannot_be_constructed(
    build: object, error: type[Exception], message: str
) -> None:
    assert callable(build)
    with pytest.raises(error, match=re.escape(message)):
        build()


def _nest(root: SessionKey, depth: int) -> SessionKey:
    return reduce(SessionKey.sub, [f"s{i}" for i in range(depth)], root)


def test_nesting_is_allowed_up_to_max_depth_and_round_trips() -> None:
    deepest = _nest(SessionKey.heartbeat("main"), MAX_DEPTH)
    assert deepest.depth == MAX_DEPTH
    assert SessionKey.parse(str(deepest)) == deepest


def test_nesting_beyond_max_depth_is_rejected_when_built_and_when_parsed() -> None:
    deepest = _nest(SessionKey.heartbeat("main"), MAX_DEPTH)
    with pytest.raises(ValueError, match=f"exceeds the limit of {MAX_DEPTH}"):
        SessionKey.sub(deepest, "one-more")
    text = f"agent:main:sub:{MAX_DEPTH + 1}:x:{deepest}"
    with pytest.raises(ValueError, match=f"exceeds the limit of {MAX_DEPTH}"):
        SessionKey.parse(text)


# Property tests ---------------------------------------------------------------------------

components = st.text(min_size=1)
channels = components.filter(lambda c: c not in RESERVED_CHANNELS)
threads = st.none() | components


@st.composite
def session_keys(draw: st.DrawFn) -> SessionKey:
    agent = draw(components)
    form = draw(st.sampled_from(["dm", "group", "cron", "heartbeat"]))
    root: SessionKey
    if form in ("dm", "group"):
        build = SessionKey.dm if form == "dm" else SessionKey.group
        root = build(agent, draw(channels), draw(components), draw(components), draw(threads))
    elif form == "cron":
        root = SessionKey.cron(agent, draw(components))
    else:
        root = SessionKey.heartbeat(agent)
    return reduce(SessionKey.sub, draw(st.lists(components, max_size=4)), root)


@given(session_keys())
def test_parse_of_str_gives_back_the_same_key(key: SessionKey) -> None:
    assert SessionKey.parse(str(key)) == key


@given(session_keys())
def test_str_of_parse_gives_back_the_same_string(key: SessionKey) -> None:
    text = str(key)
    assert str(SessionKey.parse(text)) == text


@given(session_keys())
def test_depth_parent_and_root_are_consistent(key: SessionKey) -> None:
    chain = [key]
    while chain[-1].parent is not None:
        chain.append(chain[-1].parent)
    assert key.depth == len(chain) - 1
    assert key.root == chain[-1]
    assert key.root.kind != "sub"
    for child, parent in itertools.pairwise(chain):
        assert child.kind == "sub"
        assert child.depth == parent.depth + 1
        assert child.agent == parent.agent
        assert str(child).endswith(":" + str(parent))
    text = str(key)
    assert text.startswith("agent:")
    if key.depth:
        assert text.split(":")[2:4] == ["sub", str(key.depth)]


@given(session_keys(), session_keys())
def test_different_keys_have_different_strings(a: SessionKey, b: SessionKey) -> None:
    assert (a == b) == (str(a) == str(b))


KEY_WORDS = ["agent", "main", "sub", "cron", "heartbeat", "dm", "group", "thread", "tg"]
ESCAPE_LIKE = ["1", "2", "0", "01", "", "%", "%25", "%3A", "%3a", "%2"]
key_like_tokens = st.sampled_from(KEY_WORDS + ESCAPE_LIKE) | st.text(max_size=3)
splices = st.sampled_from([":", "%", "%3A", "%3a", "%25", ":thread:1", ":sub:1:s:", "0", ""])


@st.composite
def mutated_keys(draw: st.DrawFn) -> str:
    """A valid key string with one slice replaced by a key-like fragment (or left intact)."""
    text = str(draw(session_keys()))
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, min(len(text), start + 4)))
    return text[:start] + draw(splices | key_like_tokens) + text[end:]


@given(mutated_keys() | st.lists(key_like_tokens, max_size=16).map(":".join) | st.text())
def test_any_text_either_parses_to_its_own_canonical_form_or_is_a_value_error(
    text: str,
) -> None:
    try:
        key = SessionKey.parse(text)
    except ValueError as error:
        assert str(error).startswith("malformed session key ")
    else:
        assert str(key) == text


def test_an_oversized_key_is_refused_before_parsing_with_its_length() -> None:
    text = "agent:main:sub:1:x:" * 60_000 + "agent:main:heartbeat"  # over 1 MB
    with pytest.raises(ValueError, match=f"over the limit of {MAX_KEY_CHARS}") as raised:
        SessionKey.parse(text)
    assert str(raised.value).startswith("malformed session key ")
    assert len(str(raised.value)) < 1_000


def test_a_key_at_the_size_limit_is_still_read() -> None:
    key = SessionKey.dm("main", "telegram", "default", "p" * 16_000)
    assert len(str(key)) <= MAX_KEY_CHARS
    assert SessionKey.parse(str(key)) == key


@pytest.mark.parametrize("layers", [MAX_DEPTH + 1, 800])
def test_a_key_nesting_deeper_than_the_limit_is_refused_whatever_its_depth_numbers_say(
    layers: int,
) -> None:
    text = "agent:main:sub:1:x:" * layers + "agent:main:heartbeat"
    with pytest.raises(ValueError, match=f"exceeds the limit of {MAX_DEPTH}"):
        SessionKey.parse(text)
