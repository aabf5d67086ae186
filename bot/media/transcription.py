"""Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint.

`Transcriber.transcribe(audio, name, media_type)` posts one multipart request (`file`,
`model`, optional `language`) with aiohttp and returns the text, or raises `TranscriptionFailed`
with a short reason fit for a user (never the key, never the response body in full). The
real API refuses a file name without an audio extension, so one is supplied from the media
type when the platform gave none.
"""

from __future__ import annotations

import json
import logging

import aiohttp

from bot.config.media import Endpoint

log = logging.getLogger(__name__)

_EXTENSIONS = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/m4a": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "m4a",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
}
AUDIO_SUFFIXES = frozenset(
    {"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"}
)


class TranscriptionFailed(Exception):
    """Speech-to-text did not answer with text; the message says why, briefly."""


def audio_file_name(name: str, media_type: str) -> str:
    """`name` if it ends in an audio extension the API knows, else one made from the type."""
    stem, dot, suffix = name.rpartition(".")
    if dot and suffix.lower() in AUDIO_SUFFIXES:
        return name
    extension = _EXTENSIONS.get(media_type.split(";")[0].strip().lower(), "ogg")
    return f"{(stem if dot else name) or 'voice'}.{extension}"


class Transcriber:
    """One configured speech-to-text endpoint."""

    def __init__(self, endpoint: Endpoint, *, language: str = "", timeout: float = 120) -> None:
        self._endpoint = endpoint
        self._language = language
        self._timeout = timeout

    async def transcribe(self, audio: bytes, name: str, media_type: str) -> str:
        url = f"{self._endpoint.base_url}/audio/transcriptions"
        form = aiohttp.FormData()
        form.add_field("model", self._endpoint.model)
        if self._language:
            form.add_field("language", self._language)
        form.add_field(
            "file",
            audio,
            filename=audio_file_name(name, media_type),
            content_type=media_type or "audio/ogg",
        )
        headers = {"Authorization": f"Bearer {self._endpoint.api_key}"}
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, trust_env=True) as http,
                http.post(url, data=form, headers=headers) as response,
            ):
                status = response.status
                payload = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("transcription request failed: %s", type(exc).__name__)
            raise TranscriptionFailed("the speech-to-text service is unreachable") from None
        if status != 200:
            log.warning("transcription refused: HTTP %d", status)
            raise TranscriptionFailed(f"the speech-to-text service answered HTTP {status}")
        try:
            text = json.loads(payload).get("text")
        except (ValueError, AttributeError):
            text = None
        if not isinstance(text, str):
            raise TranscriptionFailed("the speech-to-text service sent no text")
        return text.strip()
