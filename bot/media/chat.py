"""Media between the agent and the chats: files out, reactions, and attachments in.

`ChatMedia` is what the daemon wires for media. It implements the `send_file` and `react`
tools' protocols for the chat a run serves (what a platform can do comes from its
`Capabilities` and from the adapter being a `FileSender`/`Reactor`; no platform is named
here), remembers which message started each run so `react` and the acknowledgement reaction
know their target, puts `ack_reaction` on a message when it is accepted and takes it off
(`settle`, called by the gateway wherever an accepted message's inbox row closes: its turn
ended in any way, or it was dropped or stopped while waiting), holds the `MediaIntake` that turns attachments
into turn text, and answers a run aloud when `agent.voice` says so (`spoken_reply`: a run
started by a voice note that was transcribed counts as heard; `bot/media/voice_reply.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Mapping

from agents.tools.base import Tool, ToolError
from agents.tools.media import ReactTool, SendFileTool
from bot.config.errors import ConfigError
from bot.config.schema import Config
from bot.kernel.lanes import Pending, Turn
from bot.kernel.routing import decode_chat
from bot.media.intake import MediaIntake
from bot.media.voice_reply import SpokenReply, VoiceReplies
from bot.observe.telemetry import OFF, Telemetry
from channels import registry
from channels.base import (
    Channel,
    ChatRef,
    FileSender,
    Inbound,
    Outbound,
    OutboundFile,
    Reactor,
    Refused,
)
from channels.options import ChannelPolicy

log = logging.getLogger(__name__)

PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


class ChatMedia:
    """See the module docstring. One per daemon."""

    def __init__(
        self, config: Config, channels: Mapping[str, Channel], telemetry: Telemetry = OFF
    ) -> None:
        self._config = config
        self._channels = channels
        self._telemetry = telemetry  # each notice and file a counted send
        self._triggers: dict[str, Inbound] = {}  # run id -> the message that started it
        self._acks: dict[tuple[str, str, str], asyncio.Future[bool]] = {}
        self._heard: set[tuple[str, str, str]] = set()  # voice notes transcribed, not yet run
        self._heard_runs: set[str] = set()  # runs started by one of them
        try:
            self.intake = MediaIntake.from_config(config)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.voice = VoiceReplies.from_config(config, telemetry)

    def tools(self) -> list[Tool]:
        return [SendFileTool(self), ReactTool(self)]

    # -- runs ---------------------------------------------------------------------------

    async def prepare(self, items: list[Pending]) -> tuple[list[Pending], list[str]]:
        """The turn's items with attachments made text, and the plain answers owed for
        messages that had nothing usable left (those are left out of the items)."""
        kept: list[Pending] = []
        notices: list[str] = []
        for item in items:
            prepared = await self.intake.prepare(item.inbound)
            if prepared.heard:
                self._heard.add(_message_key(prepared.inbound))
            if prepared.notice:
                notices.append(prepared.notice)
            else:
                kept.append(dataclasses.replace(item, inbound=prepared.inbound))
        return kept, notices

    async def steer(self, turn: Turn, pending: Pending) -> None:
        """Hand a message with attachments to a running turn once they are text (or answer
        it plainly when nothing usable is left)."""
        kept, notices = await self.prepare([pending])
        channel = self._channels.get(pending.inbound.chat.channel)
        if channel is not None:
            for notice in notices:
                with self._telemetry.send(pending.inbound.chat.channel):
                    await channel.send(Outbound(pending.inbound.chat, notice))
        for item in kept:
            turn.steer_with(item.inbound.text)

    def begin(self, run_id: str, trigger: Inbound | None) -> None:
        if trigger is not None and trigger.chat.channel:
            self._triggers[run_id] = trigger
            if _message_key(trigger) in self._heard:
                self._heard.discard(_message_key(trigger))
                self._heard_runs.add(run_id)

    def end(self, run_id: str) -> None:
        self._triggers.pop(run_id, None)
        self._heard_runs.discard(run_id)

    def spoken_reply(self, run_id: str, channel: Channel, chat: ChatRef) -> SpokenReply | None:
        """How to speak this run's reply to `chat`, or None when it stays text."""
        return self.voice.spoken_reply(channel, chat, run_id in self._heard_runs)

    # -- acknowledgement reactions --------------------------------------------------------

    def acknowledge(self, inbound: Inbound) -> None:
        """Start putting the channel's `ack_reaction` on a message just accepted."""
        if self._ack_emoji(inbound):
            task = asyncio.ensure_future(self._ack(inbound, remove=False))
            self._acks[_message_key(inbound)] = task

    async def settle(self, inbounds: Iterable[Inbound]) -> None:
        """Take the acknowledgement off messages whose turn has ended (once it is on)."""
        for inbound in inbounds:
            self._heard.discard(_message_key(inbound))  # its run is over, or never came
            task = self._acks.pop(_message_key(inbound), None)
            if task is not None and await task:
                await self._ack(inbound, remove=True)

    def _ack_emoji(self, inbound: Inbound) -> str:
        options = self._config.channels.options(inbound.chat.channel)
        emoji = options.ack_reaction if isinstance(options, ChannelPolicy) else ""
        channel = self._channels.get(inbound.chat.channel)
        if not emoji or not isinstance(channel, Reactor) or not self._can_react(inbound.chat):
            return ""
        return emoji

    async def _ack(self, inbound: Inbound, *, remove: bool) -> bool:
        emoji = self._ack_emoji(inbound)
        channel = self._channels.get(inbound.chat.channel)
        if not emoji or not isinstance(channel, Reactor):
            return False
        try:
            await channel.react(
                inbound.chat, inbound.message_id, inbound.sender_id, emoji, remove=remove
            )
        except Exception as exc:  # an acknowledgement is never worth failing a turn
            log.info("acknowledgement reaction on %s failed: %s", inbound.chat.channel, exc)
            return False
        return True

    # -- the tools' protocols --------------------------------------------------------------

    def upload_limit(self, origin: str | None) -> int:
        chat = decode_chat(origin or "")
        if chat is None or not isinstance(self._channels.get(chat.channel), FileSender):
            return 0
        return registry.capabilities(chat.channel).max_upload_bytes

    async def send_file(
        self, origin: str | None, name: str, media_type: str, data: bytes, caption: str
    ) -> str:
        chat = decode_chat(origin or "")
        channel = self._channels.get(chat.channel) if chat is not None else None
        if chat is None or not isinstance(channel, FileSender):
            raise ToolError("this run has no chat that can receive files")
        as_photo = registry.capabilities(chat.channel).photos and media_type in PHOTO_TYPES
        try:
            with self._telemetry.send(chat.channel):
                await channel.send_file(
                    OutboundFile(chat, name, media_type, data, caption, as_photo)
                )
        except Refused as exc:
            raise ToolError(f"the chat refused {name}: {exc}") from None
        return "as a photo" if as_photo else "as a document"

    async def react(self, origin: str | None, run_id: str, emoji: str) -> None:
        trigger = self._triggers.get(run_id)
        if trigger is None:
            raise ToolError("there is no user message to react to in this run")
        channel = self._channels.get(trigger.chat.channel)
        if not isinstance(channel, Reactor) or not self._can_react(trigger.chat):
            raise ToolError("this chat does not support reactions; answer in words instead")
        try:
            await channel.react(trigger.chat, trigger.message_id, trigger.sender_id, emoji)
        except Refused as exc:
            raise ToolError(f"the chat refused the reaction {emoji}: {exc}") from None

    @staticmethod
    def _can_react(chat: ChatRef) -> bool:
        return registry.capabilities(chat.channel).can_react


def _message_key(inbound: Inbound) -> tuple[str, str, str]:
    return (inbound.chat.channel, inbound.chat.chat_id, inbound.message_id)
