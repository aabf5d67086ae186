"""Telling the owner: pairing requests and budget warnings reach the owner's DM.

The owner is who `bot/kernel/owner.py` says (the first owner id of the running channels, in registry
order); with no owner configured the notice is only logged. `OwnerLine(config, channels,
telemetry)` (each notice a counted send) is what the budget (`tell`) and access control (`pairing_request`) are given to do it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.config.schema import Config
from bot.kernel.owner import resolve_owner
from bot.observe.telemetry import OFF, Telemetry
from bot.store.rows import PairingRequest
from channels.base import Channel, Outbound

log = logging.getLogger(__name__)


async def tell_owner(
    config: Config, channels: Mapping[str, Channel], text: str, telemetry: Telemetry = OFF
) -> bool:
    """Send `text` to the owner's DM; False (logged) when there is no owner or it failed."""
    chat = resolve_owner(config, channels)
    if chat is None:
        log.info("no owner configured to tell: %s", text)
        return False
    channel = channels.get(chat.channel)
    if channel is None:
        return False
    try:
        with telemetry.send(chat.channel):
            await channel.send(Outbound(chat, text))
    except Exception as exc:
        log.warning("could not tell the owner on %s: %s", chat.channel, exc)
        return False
    return True


def pairing_notice(request: PairingRequest) -> str:
    who = (
        f"{request.sender_id} ({request.sender_name})" if request.sender_name else request.sender_id
    )
    return (
        f"New pairing request on {request.channel} from {who}. To let them in, run:\n"
        f"perch pairing approve {request.channel} {request.code}\n"
        "(the code is valid for one hour; ignore it to refuse)"
    )


class OwnerLine:
    """Notices to the owner's DM: budget warnings (`tell`) and pairing requests."""

    def __init__(
        self, config: Config, channels: Mapping[str, Channel], telemetry: Telemetry = OFF
    ) -> None:
        self.config = config
        self.channels = channels
        self.telemetry = telemetry

    async def tell(self, text: str) -> bool:
        return await tell_owner(self.config, self.channels, text, self.telemetry)

    async def pairing_request(self, request: PairingRequest) -> None:
        await self.tell(pairing_notice(request))
