"""Spoken replies (`agent.voice`): whether a reply is spoken, and speaking it.

The decision is pure: `should_speak(reply, heard)` is true for `always`, and for `auto` when
the message answered was a voice note that was transcribed (`heard`); never for `never`.
`split_for_voice(text, max_chars)` cuts a reply into the part spoken (Markdown, at most
`max_chars`, cut where `channels.chunking` would cut a message) and the rest, sent as text.
`speakable(markdown)` is what the engine reads: the plain text without link targets.

`VoiceReplies.spoken_reply(channel, chat, heard)` gives the delivery path (`bot.kernel.delivery
.TurnReply`) a `SpokenReply` for a chat whose channel is a `VoiceSender`, or None. Its
`speak(text, stream)` synthesises the spoken part, makes it a voice note (`bot.media.opus`),
removes the streamed preview, sends the note with the spoken part as its caption where the
platform has captions long enough (else that part follows as text too), then the rest as
text. When speech fails (the engine, the encoder, or the platform refused the note) it says
so in the log and the caller sends the text as usual: a reply is never lost to its voice.
"""

from __future__ import annotations

import asyncio
import logging
import re

from bot.config.errors import ConfigError
from bot.config.schema import Config
from bot.config.voice import VoiceConfig
from bot.media.opus import UnplayableAudio, to_voice_note
from bot.media.speech import SpeechEngine, SpeechFailed, speech_engine
from bot.observe.telemetry import OFF, Telemetry
from channels import registry
from channels.base import (
    Channel,
    ChatRef,
    Outbound,
    OutboundVoice,
    ReplyStream,
    VoiceSender,
)
from channels.chunking import split_markdown_chunks
from channels.formatting import render_plain, utf16_len

log = logging.getLogger(__name__)

_LINK_TARGET = re.compile(r"\s*\((?:https?|mailto):[^\s)]*\)")
_BARE_URL = re.compile(r"https?://\S+")
_SPACES = re.compile(r"[ \t]{2,}")


def should_speak(reply: str, heard: bool) -> bool:
    """`agent.voice.reply` applied: `always`, `auto` for a voice note, never `never`."""
    return reply == "always" or (reply == "auto" and heard)


def split_for_voice(text: str, max_chars: int) -> tuple[str, str]:
    """(spoken, rest): the first at most `max_chars` of `text` (Markdown), cut at a paragraph,
    line or word break, and what follows it ("" when the whole reply is spoken)."""
    if len(text) <= max_chars:
        return text, ""
    first, *others = split_markdown_chunks(text, max_chars)
    end = text.find(first.body) + len(first.body)  # the body is a slice of the text
    rest = text[end:].strip()
    if others and others[0].reopen:  # cut inside a code block: the rest opens it again
        rest = f"{others[0].reopen}\n{rest}"
    return first.text, rest


def speakable(markdown: str) -> str:
    """What a speech engine reads of `markdown`: plain text, link targets and bare addresses
    left out (nobody wants a URL read aloud)."""
    plain = _BARE_URL.sub("", _LINK_TARGET.sub("", render_plain(markdown)))
    return _SPACES.sub(" ", plain).strip()


class SpokenReply:
    """One reply to one chat, spoken (see the module docstring)."""

    def __init__(
        self,
        engine: SpeechEngine,
        channel: VoiceSender,
        text_channel: Channel,
        chat: ChatRef,
        max_chars: int,
        telemetry: Telemetry = OFF,
    ) -> None:
        self._engine = engine
        self._voice = channel
        self._text = text_channel
        self._chat = chat
        self._max_chars = max_chars
        self._telemetry = telemetry

    async def speak(self, text: str, stream: ReplyStream) -> bool:
        """Send `text` (a cleaned reply) as a voice note and text; False when nothing was sent
        (the caller sends it as text)."""
        spoken, rest = split_for_voice(text, self._max_chars)
        words = speakable(spoken)
        if not words:
            return False
        where = self._chat.channel
        try:
            audio = await self._engine.synthesize(words)
            note = await asyncio.to_thread(to_voice_note, audio)
        except (SpeechFailed, UnplayableAudio, OSError) as exc:
            log.warning("spoken reply in %s failed, sent as text: %s", where, exc or type(exc))
            return False
        caption = render_plain(spoken).strip()
        if utf16_len(caption) > registry.capabilities(where).voice_caption_chars:
            caption, rest = "", text  # no room for it under the note: all of it follows
        await stream.finish("")  # the preview gives way to the voice note
        try:
            with self._telemetry.send(where):
                await self._voice.send_voice(
                    OutboundVoice(self._chat, note.data, note.duration_s, caption, note.waveform)
                )
        except Exception as exc:  # refused, or the platform failed: the text still goes
            log.warning("%s did not take a voice note, sent as text: %s", where, exc)
            rest = text
        if rest.strip():
            with self._telemetry.send(where):
                await self._text.send(Outbound(self._chat, rest))
        return True


class VoiceReplies:
    """`agent.voice` for the daemon: the engine, made once, and the rule. One per daemon."""

    def __init__(
        self, voice: VoiceConfig, engine: SpeechEngine | None, telemetry: Telemetry = OFF
    ) -> None:
        self._voice = voice
        self._engine = engine
        self._telemetry = telemetry

    @classmethod
    def from_config(cls, config: Config, telemetry: Telemetry = OFF) -> VoiceReplies:
        """Raises ConfigError naming the key when `agent.voice.provider` is not usable."""
        try:
            engine = speech_engine(config)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return cls(config.agent.voice, engine, telemetry)

    def spoken_reply(self, channel: Channel, chat: ChatRef, heard: bool) -> SpokenReply | None:
        """How to speak this reply, or None when it stays text (the rule, no engine, or a
        platform without voice notes)."""
        if self._engine is None or not should_speak(self._voice.reply, heard):
            return None
        if not isinstance(channel, VoiceSender):
            return None
        return SpokenReply(
            self._engine, channel, channel, chat, self._voice.max_chars, self._telemetry
        )
