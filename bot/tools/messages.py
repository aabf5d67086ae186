"""Which chats the `message` tool may reach, and the `Messenger` that sends there.

`TargetPolicy` is pure: built from the config and the running channels, it reads a target
(`current`, `owner`, `<channel>:<id>`, `<channel>:group:<id>[:<thread>]`, `<channel>:dm:<id>`)
and says whether it is allowed: the run's own chat; a DM with an id in an enabled channel's
`allow_from` (never via `"*"`) or the console user (the owner); a group listed in that
channel's `groups` (never via `"*"`). A DM with anyone else is allowed only if they were
approved by pairing, which `ChatMessenger` asks the store. Everything else is refused with a
message listing how targets are written. `owner` is `bot.kernel.owner.resolve_owner`'s answer: the
first owner id of the running channels in registry order (the console's user counts too).
On top of that the run's person (`bot/kernel/people.py`) must be allowed to reach the chat:
the owner any chat above, everyone else (another allowed or paired person, a group, a cron
job they made) only their own chat. The text goes out through the `Outbox`
(`bot/kernel/ports.py`), cleaned like any reply.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agents.tools.base import ToolError
from agents.tools.message import TARGET_FORMS
from bot.config.schema import Config
from bot.kernel.delivery import DeliveryError, clean_reply
from bot.kernel.owner import owner_ids, policies
from bot.kernel.people import People
from bot.kernel.ports import Outbox
from bot.kernel.routing import decode_chat, parse_target
from bot.store.roles import Pairing
from channels.base import Channel, ChatRef

log = logging.getLogger(__name__)

Verdict = Literal["allow", "if_approved", "refuse"]


class TargetRefused(ToolError):
    """A target the policy does not allow, or one that cannot be read."""


def describe(chat: ChatRef) -> str:
    """`<channel>:123`, `<channel>:group:C1:1700.1`: the target form of a chat."""
    if chat.kind == "dm":
        return f"{chat.channel}:{chat.chat_id}"
    thread = f":{chat.thread_id}" if chat.thread_id else ""
    return f"{chat.channel}:group:{chat.chat_id}{thread}"


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    accounts: Mapping[str, str]  # running channel -> the account id its adapter reports
    owners: Mapping[str, tuple[str, ...]]  # channel -> owner DM ids, in config order
    groups: Mapping[str, frozenset[str]]  # channel -> allow-listed group ids
    pairing: frozenset[str] = frozenset()  # channels where strangers may be approved
    allowed: Mapping[str, frozenset[str]] = field(default_factory=dict)  # allow_from, no "*"

    @classmethod
    def from_config(cls, config: Config, channels: Mapping[str, Channel]) -> TargetPolicy:
        accounts = {name: channel.account for name, channel in channels.items()}
        owners = owner_ids(config, channels)
        groups: dict[str, frozenset[str]] = {}
        allowed: dict[str, frozenset[str]] = {}
        pairing: set[str] = set()
        for name, policy in policies(config, list(channels)).items():
            groups[name] = frozenset(g for g in policy.groups if g != "*")
            allowed[name] = frozenset(i for i in policy.allow_from if i != "*")
            pairing.add(name)
        return cls(accounts, owners, groups, frozenset(pairing), allowed)

    def resolve(self, target: str, current: ChatRef | None) -> ChatRef:
        """The chat `target` names; TargetRefused if it is malformed or unknown."""
        word = target.strip()
        if word.lower() == "current":
            if current is None:
                raise TargetRefused(
                    "this run has no current chat (it was not started by a message); "
                    "name a target instead: " + TARGET_FORMS
                )
            return current
        if word.lower() == "owner":
            for channel, ids in self.owners.items():  # registry order
                if ids:
                    return ChatRef(channel, self.accounts.get(channel, ""), "dm", ids[0])
            raise TargetRefused(
                "no owner is configured: put your user id in channels.<name>.allow_from of an "
                "enabled channel (the console also counts when enabled)"
            )
        try:
            return parse_target(word, dict(self.accounts))
        except ValueError as exc:
            raise TargetRefused(f"{exc}. Targets: {TARGET_FORMS}") from None

    def verdict(self, chat: ChatRef, current: ChatRef | None) -> Verdict:
        if chat.channel not in self.accounts:
            return "refuse"
        if current is not None and _same_chat(chat, current):
            return "allow"
        if chat.kind == "group":
            return "allow" if chat.chat_id in self.groups.get(chat.channel, ()) else "refuse"
        if chat.chat_id in self.owners.get(chat.channel, ()):
            return "allow"
        if chat.chat_id in self.allowed.get(chat.channel, ()):
            return "allow"
        return "if_approved" if chat.channel in self.pairing else "refuse"

    def refusal(self, target: str) -> str:
        running = ", ".join(sorted(self.accounts)) or "none"
        return (
            f"refused: {target!r} is not a chat I may message. Allowed targets: {TARGET_FORMS}. "
            f"Running channels: {running}."
        )


class ChatMessenger:
    """`agents.tools.message.Messenger`: checks the target against the policy, then sends."""

    def __init__(
        self,
        config: Config,
        store: Pairing,
        outbox: Outbox,  # the running channels; each send is counted
        *,
        people: People,  # whom a run acts for
    ) -> None:
        self.config = config
        self.store = store
        self.outbox = outbox
        self.people = people

    def policy(self) -> TargetPolicy:
        return TargetPolicy.from_config(self.config, self.outbox.channels)

    async def send(
        self,
        target: str,
        text: str,
        *,
        origin: str | None,
        session_key: str,
        requester: str | None = None,
    ) -> str:
        policy = self.policy()
        current = decode_chat(origin or "")
        try:
            chat = policy.resolve(target, current)
        except TargetRefused as exc:
            log.warning("message tool in %s: target %r refused: %s", session_key, target, exc)
            raise
        verdict = policy.verdict(chat, current)
        if verdict == "if_approved" and await self.store.is_approved(chat.channel, chat.chat_id):
            verdict = "allow"
        where = describe(chat)
        person = await self.people.person(session_key, requester)
        if verdict == "allow" and not person.may_reach(chat):
            log.warning(
                "message tool in %s: %s may not reach %s", session_key, person.describe(), where
            )
            raise TargetRefused(
                f"refused: this conversation may message only its own chat, not {target!r}; "
                "just answer here instead"
            )
        if verdict != "allow":
            log.warning("message tool in %s: target %s refused by policy", session_key, where)
            raise TargetRefused(policy.refusal(target))
        if not clean_reply(text):
            raise ToolError("the message is empty after cleaning (NO_REPLY is never sent)")
        try:
            clean = await self.outbox.send(chat, text)
        except DeliveryError as exc:
            log.error("message tool in %s: sending to %s failed: %s", session_key, where, exc)
            raise ToolError(f"sending to {where} failed: {exc.reason}") from None
        log.info("message tool in %s: sent %d chars to %s", session_key, len(clean), where)
        return where


def _same_chat(a: ChatRef, b: ChatRef) -> bool:
    return (a.channel, a.kind, a.chat_id) == (b.channel, b.kind, b.chat_id)
