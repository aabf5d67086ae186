"""Invitations to the bot's account: joined when the inviter passes the access policy,
declined (left) otherwise.

`accepts_invite(options, inviter, room_id, is_direct)` is the rule, pure and table-tested:
- A direct chat (`is_direct` on the invite) is joined unless `dm_policy` is `disabled`; with
  `allowlist` only from someone in `allow_from`. Under `pairing` or `open` the bot joins, so
  a stranger's first message can get its pairing code (or an answer).
- A room is joined unless `group_policy` is `disabled`; with `allowlist` only when the room
  is in `groups` or the inviter is in `allow_from` (the owner bringing the bot to a new
  room; answers there still need the room in `groups`).
`InviteHandler` acts on it for nio's invite events, once per room.
"""

from __future__ import annotations

import logging

import nio

from channels.matrix.options import MatrixOptions

log = logging.getLogger("channels.matrix")


def accepts_invite(options: MatrixOptions, inviter: str, room_id: str, is_direct: bool) -> bool:
    allowed = inviter in options.allow_from or "*" in options.allow_from
    if is_direct:
        if options.dm_policy == "disabled":
            return False
        return options.dm_policy != "allowlist" or allowed
    if options.group_policy == "disabled":
        return False
    if options.group_policy == "open":
        return True
    return room_id in options.groups or "*" in options.groups or allowed


class InviteHandler:
    """Joins or declines each invitation once; remembers which rooms were invited as DMs."""

    def __init__(self, options: MatrixOptions, client: nio.AsyncClient) -> None:
        self._options = options
        self._client = client
        self._handled: set[str] = set()
        self.direct_rooms: set[str] = set()

    async def on_invite(self, room: nio.MatrixInvitedRoom, event: nio.InviteMemberEvent) -> None:
        me = self._client.user_id
        if event.state_key != me or event.membership != "invite":
            return
        if room.room_id in self._handled:
            return
        self._handled.add(room.room_id)
        is_direct = bool(event.content.get("is_direct"))
        inviter = event.sender
        if accepts_invite(self._options, inviter, room.room_id, is_direct):
            joined = await self._client.join(room.room_id)
            if isinstance(joined, nio.JoinError):
                log.warning(
                    "matrix: could not join %s (invited by %s): %s", room.room_id, inviter, joined
                )
                self._handled.discard(room.room_id)
                return
            if is_direct:
                self.direct_rooms.add(room.room_id)
            kind = "direct chat" if is_direct else "room"
            log.info("matrix: joined %s %s on %s's invitation", kind, room.room_id, inviter)
            return
        await self._client.room_leave(room.room_id)
        log.info(
            "matrix: declined the invitation to %s from %s (not allowed by the access policy)",
            room.room_id,
            inviter,
        )
