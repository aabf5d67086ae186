"""Text to speech: the engines behind `agent.voice.provider`.

`SpeechEngine.synthesize(text)` returns audio bytes in any format FFmpeg reads (`bot.media.opus`
makes them a voice note) or raises `SpeechFailed` with a short reason fit for a log (never the
key, never the response body in full). Two engines:
- `OpenAISpeech`: an OpenAI-compatible `POST /audio/speech` (`{model, input, voice,
  response_format: "wav", speed}`, a Bearer key), so OpenAI and the local servers that copy it;
- `EspeakSpeech`: espeak-ng run locally (no network): the text on its stdin, WAV on stdout,
  within a timeout and an output cap, with an empty environment.
`speech_engine(config)` builds the configured one (None: no provider).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from typing import Protocol

import aiohttp

from bot.config.schema import Config
from bot.config.voice import SpeechEndpoint, speech_endpoint

log = logging.getLogger(__name__)

MAX_AUDIO_BYTES = 50_000_000  # far above a spoken `max_chars` (4,096 characters ~ 5 min WAV)
ESPEAK_WPM = 175  # espeak-ng's default rate; `speed` scales it


class SpeechFailed(Exception):
    """The engine gave no audio; the message says why, briefly."""


class SpeechEngine(Protocol):
    async def synthesize(self, text: str) -> bytes: ...


class OpenAISpeech:
    """One OpenAI-compatible `/audio/speech` endpoint."""

    def __init__(
        self, endpoint: SpeechEndpoint, *, speed: float = 1.0, timeout: float = 60
    ) -> None:
        self._endpoint = endpoint
        self._speed = speed
        self._timeout = timeout

    async def synthesize(self, text: str) -> bytes:
        url = f"{self._endpoint.base_url}/audio/speech"
        body = {
            "model": self._endpoint.model,
            "input": text,
            "voice": self._endpoint.voice,
            "response_format": "wav",
            "speed": self._speed,
        }
        headers = {"Authorization": f"Bearer {self._endpoint.api_key}"}
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, trust_env=True) as http,
                http.post(url, json=body, headers=headers) as response,
            ):
                status = response.status
                payload = await response.content.read(MAX_AUDIO_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SpeechFailed(
                f"the speech service is unreachable ({type(exc).__name__})"
            ) from None
        if status != 200:
            raise SpeechFailed(f"the speech service answered HTTP {status}{_reason(payload)}")
        if len(payload) > MAX_AUDIO_BYTES:
            raise SpeechFailed("the speech service sent more audio than a voice note holds")
        if not payload:
            raise SpeechFailed("the speech service sent no audio")
        return payload


def _reason(payload: bytes) -> str:
    """`: <message>` from an OpenAI-style error body (cut short), else nothing."""
    try:
        message = json.loads(payload)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f": {str(message)[:120]}" if message else ""


class EspeakSpeech:
    """espeak-ng on this machine (`apt-get install espeak-ng`)."""

    def __init__(self, voice: str = "", *, speed: float = 1.0, timeout: float = 60) -> None:
        self._voice = voice or "en"
        self._wpm = max(80, min(450, round(ESPEAK_WPM * speed)))
        self._timeout = timeout

    @staticmethod
    def installed() -> bool:
        return shutil.which("espeak-ng") is not None

    async def synthesize(self, text: str) -> bytes:
        program = shutil.which("espeak-ng")
        if program is None:
            raise SpeechFailed("espeak-ng is not installed (apt-get install espeak-ng)")
        # The text goes on stdin, never as an argument: a reply starting with "-" stays text.
        args = [program, "--stdout", "-b", "1", "-v", self._voice, "-s", str(self._wpm)]
        process = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},
        )
        try:
            audio, errors = await asyncio.wait_for(
                process.communicate(text.encode("utf-8")), self._timeout
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise SpeechFailed(f"espeak-ng took longer than {self._timeout:g} s") from None
        if process.returncode != 0 or not audio:
            why = errors.decode("utf-8", "replace").strip().splitlines()[:1]
            raise SpeechFailed(f"espeak-ng failed: {why[0][:120] if why else process.returncode}")
        return audio


def speech_engine(config: Config) -> SpeechEngine | None:
    """The engine `agent.voice.provider` names (None: none). Raises ValueError naming the key
    when the provider is missing or of the wrong kind."""
    voice = config.agent.voice
    if voice.provider is None:
        return None
    if voice.provider == "espeak":
        return EspeakSpeech(voice.voice, speed=voice.speed, timeout=voice.timeout_s)
    endpoint = speech_endpoint(config.agent.voice, config.providers)
    assert endpoint is not None  # a provider that is no local engine has an endpoint
    return OpenAISpeech(endpoint, speed=voice.speed, timeout=voice.timeout_s)
