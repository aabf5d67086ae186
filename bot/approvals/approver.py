"""Who answers an approval: the owner's DM (`approver: owner`) or the requester's
(`approver: requester`), on the platform the turn runs on; the owner's DM on another
platform when the turn has no chat (cron, heartbeat) or its platform names no owner.

`channel_owner` is the one place that says who owns a channel for approvals: the first
`allow_from` id (issue 39 adds an explicit `channels.<name>.owner`, which this line will read
first when it lands).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bot.config.schema import Config
from bot.kernel.owner import resolve_owner
from channels.base import Channel, ChatRef


def channel_owner(config: Config, channel: str) -> str | None:
    """The owner's platform id on `channel`, or None if its config names nobody."""
    options = config.channels.options(channel)
    ids = options.owner_ids() if options is not None else ()
    return ids[0] if ids else None


@dataclass(frozen=True, slots=True)
class ApproverDM:
    """Where the request goes (`chat`, a DM) and who alone may answer it (`person`, a
    platform id on that chat's channel)."""

    chat: ChatRef
    person: str

    @property
    def name(self) -> str:
        """How the audit names them: `<channel>:<platform id>`."""
        return f"{self.chat.channel}:{self.person}"


def approver_dm(
    config: Config,
    channels: Mapping[str, Channel],
    chat: ChatRef | None,
    requester: str | None,
    who: Literal["owner", "requester"],
) -> ApproverDM | None:
    """The approver and their DM, or None when nobody can be asked."""
    if chat is not None and chat.channel in channels:
        person = requester if who == "requester" and requester else None
        person = person or channel_owner(config, chat.channel)
        if person is not None:
            if chat.kind == "dm" and requester == person:  # the DM the turn runs in
                return ApproverDM(ChatRef(chat.channel, chat.account, "dm", chat.chat_id), person)
            return ApproverDM(ChatRef(chat.channel, chat.account, "dm", person), person)
    owner = resolve_owner(config, channels)
    return ApproverDM(owner, owner.chat_id) if owner is not None else None
