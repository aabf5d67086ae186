"""Which agent answers where: `bindings:`, first match wins, else main (a table)."""

from __future__ import annotations

from bot.config.hub import BindingConfig
from bot.fleet.bindings import agent_for
from channels.base import ChatRef

RULES = [
    BindingConfig(agent="family", channel="telegram", chat="-100123"),
    BindingConfig(agent="boss", channel="telegram", peer="42"),
    BindingConfig(agent="work", channel="slack"),
    BindingConfig(agent="late", channel="slack", chat="C1"),  # shadowed by the line above
    BindingConfig(agent="second", account="bot2"),
]


def test_first_match_wins_and_unmatched_traffic_goes_to_main() -> None:
    cases = [
        (ChatRef("telegram", "bot1", "group", "-100123"), "family"),
        (ChatRef("telegram", "bot1", "group", "-100123", "7"), "family"),  # a topic of it
        (ChatRef("telegram", "bot1", "dm", "-100123"), "main"),  # chat: groups only
        (ChatRef("telegram", "bot1", "dm", "42"), "boss"),
        (ChatRef("telegram", "bot1", "group", "42"), "main"),  # peer: DMs only
        (ChatRef("slack", "T1", "group", "C1"), "work"),
        (ChatRef("discord", "bot2", "dm", "9"), "second"),
        (ChatRef("signal", "+1555", "dm", "+1666"), "main"),
    ]
    for chat, agent in cases:
        assert agent_for(RULES, "main", chat) == agent, chat
