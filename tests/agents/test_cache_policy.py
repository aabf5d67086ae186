"""`agent.cache.ttl`: the prompt cache's life per session, and where a request's marks go."""

from __future__ import annotations

import pytest

from agents.cache_breakpoints import CachePlan, last_sent_block, request_messages
from agents.cache_policy import CachePolicy, choose_ttl
from agents.model import Message, text_block

MIN = 60.0


@pytest.mark.parametrize(
    ("gaps", "ttl"),
    [
        ([], "5m"),  # nothing known yet: the cheaper write
        ([30, 45, 10, 20], "5m"),  # a quick chat: 5 minutes hold
        ([6 * MIN], "1h"),
        ([6 * MIN, 30, 30, 30], "1h"),  # one pause of minutes among quick ones pays for it
        ([20 * MIN] * 4, "1h"),
        ([2 * 3600.0] * 4, "5m"),  # hours apart: neither holds; the cheaper write
        ([6 * MIN, 30, 30, 2 * 3600.0], "5m"),  # the hour-long gap tips it back
        ([59 * MIN, 2 * 3600.0, 2 * 3600.0], "5m"),  # mostly hours apart
    ],
)
def test_auto_chooses_the_cheaper_life_from_the_recent_gaps(gaps: list[float], ttl: str) -> None:
    assert choose_ttl(gaps) == ttl


def test_auto_keeps_the_shared_prefix_for_an_hour_and_paces_each_session_alone() -> None:
    now = [0.0]
    policy = CachePolicy("auto", clock=lambda: now[0])
    assert policy.plan("slow") == CachePlan("1h", "5m")  # first run: no gap known
    policy.ended("slow")
    assert policy.plan("quick") == CachePlan("1h", "5m")
    policy.ended("quick")
    now[0] += 6 * MIN
    assert policy.current("slow") == CachePlan("1h", "5m")  # nothing recorded by asking
    assert policy.plan("slow") == CachePlan("1h", "1h")  # six minutes idle: the hour pays
    policy.ended("slow")
    assert policy.current("slow") == CachePlan("1h", "1h")
    now[0] += 20
    assert policy.plan("quick") == CachePlan("1h", "1h")  # its gap was six minutes too
    for _ in range(4):  # then four quick exchanges push the pause out of the window
        policy.ended("quick")
        now[0] += 20
        plan = policy.plan("quick")
    assert plan == CachePlan("1h", "5m")


def test_fixed_settings_ignore_the_pace_and_the_memory_stays_bounded() -> None:
    for mode in ("5m", "1h"):
        policy = CachePolicy(mode)  # type: ignore[arg-type]
        assert policy.plan("k") == CachePlan(mode, mode)  # type: ignore[arg-type]
    bounded = CachePolicy("auto", max_sessions=3)
    for key in "abcde":
        bounded.plan(key)
        bounded.ended(key)
    assert bounded.current("a") == CachePlan("1h", "5m")  # forgotten: the least recent
    with pytest.raises(ValueError, match="cannot follow"):
        CachePlan("5m", "1h")  # the API refuses a 1-hour mark after a 5-minute one


def test_the_marks_go_where_the_last_request_ended_and_at_the_end_on_copies() -> None:
    history: list[Message] = [
        {"role": "user", "content": [text_block("[time]"), text_block("hi")]},
        {"role": "assistant", "content": [text_block("hello")]},
    ]
    new: Message = {"role": "user", "content": [text_block("[time]"), text_block("again")]}
    anchor = last_sent_block(history)
    assert anchor is history[0]["content"][-1]
    sent = request_messages([*history, new], anchor=anchor, ttl="1h")
    marks = [
        (i, j)
        for i, m in enumerate(sent)
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marks == [(0, 1), (2, 1)]
    assert sent[2]["content"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert all("cache_control" not in b for m in [*history, new] for b in m["content"])
    only_end = request_messages([*history, new], anchor=anchor, room=1)
    assert ["cache_control" in b for m in only_end for b in m["content"]].count(True) == 1
