"""Whose turn this is, and what they may see and reach: the one person rule of the house.

A turn acts for one `Person`, derived from its session key and the channels' owners
(`Owners`: channel -> the owner's id there, `ChannelPolicy.owner_ids()`: the explicit
`channels.<name>.owner`, else the first real `allow_from` id; the console's user):
- **the owner**: a DM with that one id, `perch chat`'s own DM (channel `cli`: only the
  operator at the shell reaches it), the heartbeat, and a cron job the owner or the
  operator's CLI created;
- **another person**: any other DM (allowed in `allow_from` or paired), who is their chat;
- **a group**: everyone in it, as the group's chat (its threads included).
A sub-agent acts for its root chat's person; a cron run for the person whose turn created
the job (`People.person` follows `created_by`); a job nobody can trace acts for nobody.

What a person may do (recall's scopes in `bot/recall/visibility.py` follow the same rule):
- see the memory files and everyone's conversations: the owner only; others see their own
  chat's conversations and what is public (skills), and their turns cannot open the memory
  files with any tool (`private_entries`: the file tools, `send_file` and `memory_append`
  refuse them, exec's sandbox masks them);
- reach a chat (the `message` tool, a cron job's delivery or chat session): the owner any
  chat the channel policy allows; everyone else their own chat only.
Pure except `People.person`, which asks the cron book who created a job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.kernel.sessions import SessionKey
from channels.base import ChatRef
from channels.options import ChannelOptions

Owners = Mapping[str, Collection[str]]  # channel -> the owner's id there (at most one)
Role = Literal["owner", "person", "group", "nobody"]
CreatorOf = Callable[[str], Awaitable[str | None]]  # cron job id -> created_by; None: unknown

# The workspace entries that are the owner's memory: another person's turn may not open them
# (file tools, send_file, memory_append; exec sees them masked).
MEMORY_ENTRIES = ("MEMORY.md", "memory")
OPERATOR_CHANNEL = "cli"  # `perch chat`'s DM (bot/operator/ops_chat.py CLI_CHAT)
OPERATOR_MAKERS = ("", "cli")  # a job's `created_by` from `perch cron add` or the dashboard
MAX_HOPS = 8  # a cron job made by a cron run made by ...: followed this far, then nobody


@dataclass(frozen=True, slots=True)
class Person:
    """Who a turn acts for. `chat` is the chat (without thread) they are, None for the owner
    acting beyond any one chat (operator, heartbeat, the owner's cron jobs) and for nobody."""

    role: Role
    chat: SessionKey | None = None

    @property
    def is_owner(self) -> bool:
        return self.role == "owner"

    def owns(self, chat: ChatRef) -> bool:
        """Whether `chat` is this person's own chat (any thread of it)."""
        mine = self.chat
        return mine is not None and (mine.channel, mine.kind, mine.chat_id) == (
            chat.channel,
            chat.kind,
            chat.chat_id,
        )

    def may_reach(self, chat: ChatRef) -> bool:
        """Whether this person's turn may post to, or schedule into, `chat`."""
        return self.is_owner or self.owns(chat)

    def describe(self) -> str:
        if self.chat is None:
            return "the owner" if self.is_owner else "nobody"
        where = f"{self.chat.chat_id} on {self.chat.channel}"
        if self.is_owner:
            return f"the owner ({where})"
        return f"group {where}" if self.role == "group" else f"person {where}"


OWNER = Person("owner")
NOBODY = Person("nobody")


def owners_of(channels: Mapping[str, ChannelOptions]) -> dict[str, tuple[str, ...]]:
    """The owner id of every channel in a `{name: options}` map (`ChannelsConfig.all()`)."""
    return {name: options.owner_ids() for name, options in channels.items()}


def is_owner_dm(key: SessionKey, owners: Owners) -> bool:
    """A DM (any thread, any sub-agent below it) with the owner of its channel."""
    root = key.root
    if root.kind != "dm" or root.channel is None:
        return False
    return root.channel == OPERATOR_CHANNEL or root.chat_id in owners.get(root.channel, ())


def person_of(key: SessionKey, owners: Owners) -> Person:
    """The person a turn of session `key` acts for; a cron key counts as the owner's (its
    creator is `People.person`'s business: ask it for cron runs)."""
    root = key.root
    if root.kind not in ("dm", "group"):
        return OWNER  # heartbeat; cron made by the operator
    chat = root.chat_key
    if is_owner_dm(root, owners):
        return Person("owner", chat)
    return Person("person" if root.kind == "dm" else "group", chat)


def private_entries(person: Person) -> tuple[str, ...]:
    """What of the workspace a turn for `person` may not open (`ToolContext.private`)."""
    return () if person.is_owner else MEMORY_ENTRIES


class People:
    """`person(session_key)`: `person_of`, with cron runs traced to whoever made the job.

    A DM whose chat id is not the person's (a DM channel of its own) is known as the owner's
    by its sender; once a message of the owner's was seen there, the chat is remembered as
    theirs, so the work that runs for it without a sender (its compaction's memory flush, a
    tool call of a run the sender is not passed to) acts for the owner too. Such a DM has
    two members, the bot and the owner; a message from anyone else there is still judged by
    its sender."""

    def __init__(self, owners: Owners, creator_of: CreatorOf | None = None) -> None:
        self.owners = owners
        self.creator_of = creator_of
        self._owner_dms: set[tuple[str, str]] = set()  # (channel, DM chat id) seen by sender

    async def person(self, session_key: str, sender: str | None = None) -> Person:
        """Whom a turn of `session_key` acts for; `sender` is who wrote the message it answers,
        where one did: on platforms whose DM is a chat of its own (a DM channel id, not the
        person's id) the owner is known by the sender."""
        try:
            key = SessionKey.parse(session_key)
        except ValueError:
            return NOBODY
        root = key.root
        if root.kind == "dm" and root.channel is not None and root.chat_id is not None:
            chat = (root.channel, root.chat_id)
            by_sender = sender is not None and sender in self.owners.get(root.channel, ())
            if by_sender:
                self._owner_dms.add(chat)
            if by_sender or (sender is None and chat in self._owner_dms):
                return Person("owner", root.chat_key)
        for _ in range(MAX_HOPS):
            root = key.root
            if root.kind != "cron" or root.job_id is None:
                return person_of(key, self.owners)
            if self.creator_of is None:
                return NOBODY
            created_by = await self.creator_of(root.job_id)
            if created_by is None:
                return NOBODY  # the job is gone: nobody stands behind its run
            if created_by in OPERATOR_MAKERS:
                return OWNER  # `perch cron add`, the dashboard: the operator
            try:
                key = SessionKey.parse(created_by)
            except ValueError:
                return NOBODY
        return NOBODY

    async def creator(self, created_by: str) -> Person:
        """The person behind a cron job's `created_by` ("" or "cli": the operator)."""
        return OWNER if created_by in OPERATOR_MAKERS else await self.person(created_by)
