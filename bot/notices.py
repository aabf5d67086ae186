"""Telling the owner: pairing requests and budget warnings reach the owner's DM.

The owner is who `bot/owner.py` says (the first owner id of the running channels, in registry
order); with no owner configured the notice is only logged. `install_guards(daemon)` wires the daily budget
(`bot/budget.py`) into the gateway, the scheduler, sub-agents, `/budget` and the usage
listeners, and the pairing notice into access control; `bot/daemon.py` calls it once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.budget import Budget
from bot.config.schema import Config
from bot.owner import resolve_owner
from bot.store.rows import PairingRequest
from channels.base import Channel, Outbound

if TYPE_CHECKING:
    from bot.daemon import Daemon

log = logging.getLogger(__name__)


async def tell_owner(config: Config, channels: Mapping[str, Channel], text: str) -> bool:
    """Send `text` to the owner's DM; False (logged) when there is no owner or it failed."""
    chat = resolve_owner(config, channels)
    if chat is None:
        log.info("no owner configured to tell: %s", text)
        return False
    channel = channels.get(chat.channel)
    if channel is None:
        return False
    try:
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


def install_guards(daemon: Daemon) -> Budget:
    """Wire the budget and the owner notices into a daemon whose parts are built."""
    config, store = daemon.config, daemon.store
    assert store is not None and daemon.gateway is not None

    async def notify(text: str) -> bool:
        return await tell_owner(config, daemon.channels, text)

    async def on_request(request: PairingRequest) -> None:
        await notify(pairing_notice(request))

    budget = Budget(config.agent.budget, store, notify)
    gateway = daemon.gateway
    gateway.access.on_request = on_request
    gateway.commands.budget = budget
    if budget.enabled:
        gateway.budget_gate = budget.notice
        gateway.runner.add_usage_listener(budget.after_run)
        if daemon.scheduler is not None:
            daemon.scheduler.budget_gate = budget.notice
        if daemon.subagents is not None:
            daemon.subagents.gate = budget.notice
    return budget
