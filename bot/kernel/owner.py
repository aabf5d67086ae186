"""Who the owner is: the one answer heartbeat, cron (`owner`) and the `message` tool share.

The owner is the owner id (`owner_ids()` of the channel's options: `channels.<name>.owner`, else
the first non-`*` id in `allow_from` for chat platforms, the user for the console; one id per
channel, every other allowed person is someone else, `bot/kernel/people.py`) of the running channels,
taken in registry order, as a DM on that channel's account. No platform is named here: the
registry's order and the plug-ins' options decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.config.schema import Config
from channels import registry
from channels.base import Channel, ChatRef
from channels.options import ChannelPolicy


def owner_ids(config: Config, channels: Mapping[str, Channel]) -> dict[str, tuple[str, ...]]:
    """Each running channel's owner ids, in registry order."""
    return registry.owner_ids(config.channels, channels)


def resolve_owner(config: Config, channels: Mapping[str, Channel]) -> ChatRef | None:
    """The owner's DM on the first running channel that names one, or None."""
    for name, ids in owner_ids(config, channels).items():
        if ids:
            return ChatRef(name, channels[name].account, "dm", ids[0])
    return None


def policies(config: Config, names: Iterable[str]) -> dict[str, ChannelPolicy]:
    """The access rules of the channels in `names` that take messages from strangers."""
    found: dict[str, ChannelPolicy] = {}
    for name in names:
        options = config.channels.options(name)
        if isinstance(options, ChannelPolicy):
            found[name] = options
    return found
