"""`perch doctor`'s line about spoken replies (`agent.voice`): the engine is asked to say one
word and its audio is made a voice note, so a wrong key, an unreachable service, a missing
espeak-ng or a broken encoder shows before a voice note is answered in silence."""

from __future__ import annotations

import asyncio

from bot.config.schema import Config
from bot.media.opus import UnplayableAudio, to_voice_note
from bot.media.speech import SpeechFailed, speech_engine
from bot.operator.checks import Check

NAME = "voice"


async def voice_check(config: Config) -> Check:
    voice = config.agent.voice
    if voice.provider is None or voice.reply == "never":
        return Check(True, NAME, "off: replies are text (agent.voice.provider, agent.voice.reply)")
    try:
        engine = speech_engine(config)
    except ValueError as exc:
        return Check(False, NAME, str(exc), "fix agent.voice.provider (docs/voice.md)")
    assert engine is not None
    try:
        audio = await engine.synthesize("Perch is ready.")
        note = await asyncio.to_thread(to_voice_note, audio)
    except (SpeechFailed, UnplayableAudio, OSError) as exc:
        fix = (
            "apt-get install espeak-ng"
            if voice.provider == "espeak"
            else f"check providers.{voice.provider} (base_url, api_key) and agent.voice.model"
        )
        return Check(False, NAME, f"{voice.provider} could not speak: {exc}", fix)
    return Check(
        True, NAME, f"{voice.provider} speaks ({note.duration_s:.1f} s of OGG/Opus for a test line)"
    )
