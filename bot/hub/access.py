"""Who may talk to the bot: DM policies, pairing codes, group policies and mentions.

`AccessControl.check(inbound)` returns an `Access` verdict for one message (DESIGN section 3,
step 2). DMs: `pairing` (unknown senders get an 8-character code valid for an hour, at most 3
pending per channel, and the owner approves with `perch pairing approve`), `allowlist`,
`open` (requires `"*"`), `disabled`. Groups: `allowlist` (default, fail closed), `open`,
`disabled`; with `require_mention`, unmentioned messages become context only. An empty list
never means everyone: only `"*"` does. The console is the owner's own terminal: always in.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

from bot.store.roles import Pairing
from bot.store.rows import PairingRequest
from channels.base import Inbound
from channels.options import ChannelPolicy

log = logging.getLogger(__name__)

PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0 O 1 I
PAIRING_CODE_LENGTH = 8
PAIRING_TTL = 3600.0
PAIRING_MAX_PENDING = 3


class Verdict(Enum):
    ALLOW = "allow"  # run it
    CONTEXT = "context"  # an allowed group, not addressed to us: remember, don't answer
    PAIRING = "pairing"  # unknown DM sender: reply with `reply`, do not run
    DENY = "deny"  # ignore silently (logged)


@dataclass(frozen=True, slots=True)
class Access:
    verdict: Verdict
    reply: str = ""
    reason: str = ""


def new_pairing_code() -> str:
    return "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(PAIRING_CODE_LENGTH))


class AccessControl:
    def __init__(
        self,
        store: Pairing,
        policies: dict[str, ChannelPolicy],
        on_request: Callable[[PairingRequest], Awaitable[object]] | None = None,
    ) -> None:
        self._store = store
        self._policies = policies
        self._patterns = {
            name: [re.compile(p, re.IGNORECASE) for p in policy.mention_patterns]
            for name, policy in policies.items()
        }
        self.on_request = on_request  # told of each new pairing request (the owner is)

    async def check(self, inbound: Inbound) -> Access:
        channel = inbound.chat.channel
        if channel == "console":
            return Access(Verdict.ALLOW)
        policy = self._policies.get(channel)
        if policy is None:
            return Access(Verdict.DENY, reason=f"no policy for channel {channel!r}")
        if inbound.chat.is_group:
            return self._check_group(inbound, policy)
        return await self._check_dm(inbound, policy)

    async def is_authorised(self, inbound: Inbound) -> bool:
        """Whether the sender may use commands here (no pairing side effects)."""
        channel = inbound.chat.channel
        if channel == "console":
            return True
        policy = self._policies.get(channel)
        if policy is None:
            return False
        if inbound.chat.is_group:
            return self._group_allowed(inbound, policy)
        if policy.dm_policy == "disabled":
            return False
        if policy.dm_policy == "open" or policy.allows(inbound.sender_id):
            return True
        return await self._store.is_approved(channel, inbound.sender_id)

    def mentioned(self, inbound: Inbound) -> bool:
        if inbound.mentioned:
            return True
        return any(p.search(inbound.text) for p in self._patterns.get(inbound.chat.channel, ()))

    def _group_allowed(self, inbound: Inbound, policy: ChannelPolicy) -> bool:
        if policy.group_policy == "disabled":
            return False
        if policy.group_policy == "open":
            return True
        return "*" in policy.groups or inbound.chat.chat_id in policy.groups

    def _check_group(self, inbound: Inbound, policy: ChannelPolicy) -> Access:
        if not self._group_allowed(inbound, policy):
            return Access(
                Verdict.DENY,
                reason=f"group {inbound.chat.chat_id} is not in channels."
                f"{inbound.chat.channel}.groups (group_policy {policy.group_policy})",
            )
        if policy.require_mention and not self.mentioned(inbound):
            return Access(Verdict.CONTEXT)
        return Access(Verdict.ALLOW)

    async def _check_dm(self, inbound: Inbound, policy: ChannelPolicy) -> Access:
        channel, sender = inbound.chat.channel, inbound.sender_id
        if policy.dm_policy == "disabled":
            return Access(Verdict.DENY, reason=f"DMs are disabled on {channel}")
        if policy.dm_policy == "open" or policy.allows(sender):
            return Access(Verdict.ALLOW)
        if await self._store.is_approved(channel, sender):
            return Access(Verdict.ALLOW)
        if policy.dm_policy == "allowlist":
            return Access(Verdict.DENY, reason=f"{sender} is not in channels.{channel}.allow_from")
        return await self._pair(inbound)

    async def _pair(self, inbound: Inbound) -> Access:
        channel, sender = inbound.chat.channel, inbound.sender_id
        pending = await self._store.pairing_requests(channel)
        for request in pending:
            if request.sender_id == sender:
                return Access(Verdict.PAIRING, _pairing_reply(channel, request.code))
        if len(pending) >= PAIRING_MAX_PENDING:
            log.warning(
                "pairing: %s already has %d pending codes; ignoring %s on %s",
                channel,
                len(pending),
                sender,
                channel,
            )
            return Access(Verdict.DENY, reason="too many pending pairing codes")
        now = time.time()
        request = PairingRequest(
            channel, new_pairing_code(), sender, inbound.sender_name, now, now + PAIRING_TTL
        )
        await self._store.pairing_add(request)
        log.info(
            "pairing: new code for %s (%s) on %s; approve with: perch pairing approve %s %s",
            sender,
            inbound.sender_name or "?",
            channel,
            channel,
            request.code,
        )
        if self.on_request is not None:
            await self.on_request(request)
        return Access(Verdict.PAIRING, _pairing_reply(channel, request.code))


def _pairing_reply(channel: str, code: str) -> str:
    return (
        "Hi! I don't know you yet. To talk to me, ask my owner to approve this pairing code "
        f"(valid for one hour):\n\n{code}\n\n"
        f"(They run: perch pairing approve {channel} {code})"
    )
