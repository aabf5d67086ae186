"""The `agent.voice:` section: spoken replies (text to speech).

`agent.voice: {reply, provider, model, voice, max_chars, speed, timeout_s}`. `reply: auto`
answers a voice note with a voice note, `always` speaks every chat reply, `never` keeps to
text. `provider` names an entry of `providers:` of `kind: openai` (its `/audio/speech`
endpoint, base URL and key are used), or `espeak` for the local engine (espeak-ng, no
network). With no provider, replies stay text whatever `reply` says. `speech_endpoint`
resolves the provider the way `media.transcription` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from bot.config.providers import ProvidersConfig

LOCAL_ENGINES = frozenset({"espeak"})  # provider names that need no `providers:` entry


class VoiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reply: Literal["auto", "always", "never"] = "auto"
    provider: str | None = None  # a kind: openai provider's name, or "espeak"; None: no voice
    model: str = "gpt-4o-mini-tts"  # for an OpenAI-compatible provider
    voice: str = ""  # empty: "alloy" for OpenAI-compatible providers, "en" for espeak
    max_chars: int = Field(1000, ge=50, le=4096)  # spoken at most; the rest follows as text
    speed: float = Field(1.0, ge=0.25, le=4.0)
    timeout_s: float = Field(60, gt=0)


@dataclass(frozen=True, slots=True)
class SpeechEndpoint:
    """Where text-to-speech requests go (`base_url` ends before `/audio/speech`)."""

    base_url: str
    api_key: str
    model: str
    voice: str


def speech_endpoint(wanted: VoiceConfig, providers: ProvidersConfig) -> SpeechEndpoint | None:
    """The OpenAI-compatible endpoint `agent.voice.provider` names; None for no provider or a
    local engine. Raises ValueError naming the key when the provider is missing or not
    `kind: openai`."""
    if wanted.provider is None or wanted.provider in LOCAL_ENGINES:
        return None
    found = providers.get(wanted.provider)
    if found is None:
        raise ValueError(
            f"agent.voice.provider: no provider {wanted.provider!r} under providers: (nor a "
            f"local engine: {', '.join(sorted(LOCAL_ENGINES))}); add providers."
            f"{wanted.provider}: {{kind: openai, base_url: ..., api_key: ...}}"
        )
    if found.kind != "openai":
        raise ValueError(
            f"agent.voice.provider: providers.{wanted.provider} is kind {found.kind!r}; "
            "text-to-speech needs a provider of kind: openai"
        )
    base_url = (found.base_url or "https://api.openai.com/v1").rstrip("/")
    return SpeechEndpoint(base_url, found.api_key, wanted.model, wanted.voice or "alloy")
