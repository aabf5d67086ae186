"""The `media:` config section: speech-to-text for voice notes and limits for documents.

`media.transcription: {provider, model, max_bytes, max_duration_s, language}` names a
provider of `kind: openai` (`providers.<name>`) whose `/audio/transcriptions` endpoint turns
voice notes into text; without it, voice notes get a one-line answer saying so.
`media.documents: {max_chars, inbox}` caps how much of a text-like attachment enters a turn
and names the workspace folder other files are saved under.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from bot.config.providers import ProvidersConfig


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TranscriptionConfig(_Model):
    provider: str = Field(min_length=1)
    model: str = "whisper-1"
    max_bytes: int = Field(20_000_000, ge=1_000)  # OpenAI's endpoint takes up to 25 MB
    max_duration_s: float = Field(600, gt=0)
    language: str = ""  # ISO-639-1 hint ("de"); empty lets the model detect it
    timeout_s: float = Field(120, gt=0)


class DocumentsConfig(_Model):
    max_chars: int = Field(50_000, ge=100)  # text of one attachment put into the turn
    inbox: str = "inbox"  # workspace folder for files that are not text: inbox/<date>/<name>


class MediaConfig(_Model):
    transcription: TranscriptionConfig | None = None
    documents: DocumentsConfig = Field(default_factory=DocumentsConfig)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where speech-to-text requests go."""

    base_url: str
    api_key: str
    model: str


def transcription_endpoint(
    wanted: TranscriptionConfig | None, providers: ProvidersConfig
) -> Endpoint | None:
    """The endpoint `media.transcription` (`wanted`) names among `providers`, or None when it
    is not configured.

    Raises ValueError naming the key to fix when the provider is missing or not `kind: openai`.
    """
    if wanted is None:
        return None
    found = providers.get(wanted.provider)
    if found is None:
        raise ValueError(
            f"media.transcription.provider: no provider {wanted.provider!r} under providers:; "
            f"add providers.{wanted.provider}: {{kind: openai, base_url: ..., api_key: ...}}"
        )
    if found.kind != "openai":
        raise ValueError(
            f"media.transcription.provider: providers.{wanted.provider} is kind {found.kind!r}; "
            "speech-to-text needs a provider of kind: openai"
        )
    base_url = (found.base_url or "https://api.openai.com/v1").rstrip("/")
    return Endpoint(base_url, found.api_key, wanted.model)
