"""Chat addresses as strings: how a run remembers where its answer (or a cron result) goes.

`encode_chat(ChatRef) -> str` and `decode_chat(str) -> ChatRef` round-trip a chat address
through one compact JSON string, stored as a session's `origin` and a cron job's
`deliver_to`. `parse_target("<channel>:12345")` reads the short form people type in config
and on the command line (`<channel>:<chat id>[:<thread id>]`, a DM unless told `group:`).
"""

from __future__ import annotations

import json

from channels.base import ChatRef


def encode_chat(chat: ChatRef) -> str:
    data = {"c": chat.channel, "a": chat.account, "k": chat.kind, "id": chat.chat_id}
    if chat.thread_id:
        data["t"] = chat.thread_id
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def decode_chat(text: str) -> ChatRef | None:
    """The chat of an encoded address, or None if the text is empty or not one."""
    if not text:
        return None
    try:
        data = json.loads(text)
        kind = data["k"]
        if kind not in ("dm", "group"):
            return None
        return ChatRef(str(data["c"]), str(data["a"]), kind, str(data["id"]), data.get("t"))
    except (ValueError, KeyError, TypeError):
        return None


def parse_target(text: str, accounts: dict[str, str]) -> ChatRef:
    """`<channel>:123`, `<channel>:group:C123:1700.1`, `<channel>:dm:+4912345` -> a ChatRef.

    `accounts` maps channel names to the account id the adapter reports. Raises ValueError
    with the accepted forms when the text is not one of them.
    """
    parts = text.split(":", 1)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise ValueError(
            f"{text!r} is not a chat address; write <channel>:<chat id>, "
            "<channel>:group:<group id>[:<thread id>] or <channel>:dm:<peer id>"
        )
    channel, rest = parts
    if channel not in accounts:
        known = ", ".join(sorted(accounts)) or "none"
        raise ValueError(f"{text!r}: unknown or disabled channel {channel!r} (enabled: {known})")
    kind = "dm"
    if rest.startswith(("group:", "dm:")):
        kind, rest = rest.split(":", 1)
    chat_id, _, thread = rest.partition(":") if kind == "group" else (rest, "", "")
    if not chat_id:
        raise ValueError(f"{text!r}: the chat id is empty")
    return ChatRef(
        channel, accounts[channel], "group" if kind == "group" else "dm", chat_id, thread or None
    )
