"""Which agent answers a chat: `bindings:`, first match wins, unmatched traffic to `main`.

A binding's set fields must all match the chat: `channel` and `account` as the adapter
reports them, `chat` a group's (room's, channel's) id, `peer` a person's id in a DM. Pure:
`agent_for(bindings, main, chat)` is table-tested.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.config.hub import BindingConfig
from channels.base import ChatRef


def matches(binding: BindingConfig, chat: ChatRef) -> bool:
    """True when every field `binding` sets holds for `chat`."""
    if binding.channel is not None and binding.channel != chat.channel:
        return False
    if binding.account is not None and binding.account != chat.account:
        return False
    if binding.chat is not None and (chat.kind != "group" or binding.chat != chat.chat_id):
        return False
    return binding.peer is None or (chat.kind == "dm" and binding.peer == chat.chat_id)


def agent_for(bindings: Sequence[BindingConfig], main: str, chat: ChatRef) -> str:
    """The id of the agent that answers in `chat`."""
    for binding in bindings:
        if matches(binding, chat):
            return binding.agent
    return main
