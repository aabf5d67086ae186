"""A fake OpenAI-compatible speech-to-text server on 127.0.0.1.

Serves `POST /v1/audio/transcriptions` as the real API does: a multipart form with `file` and
`model`, a Bearer key, a 400 for a file name without an audio extension, and `{"text": ...}`
on success. `transcripts` maps audio bytes to the text to answer (default: "hello from
voice"); `fail_next(status)` scripts an error. Every request is kept in `requests`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

API_KEY = "sk-test-audio"
AUDIO_SUFFIXES = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")


@dataclass(frozen=True)
class TranscriptionRequest:
    filename: str
    model: str
    data: bytes
    authorization: str
    language: str | None


class FakeOpenAIAudio:
    """`async with FakeOpenAIAudio() as stt:` then use `stt.base_url` (ends in /v1)."""

    def __init__(self, api_key: str = API_KEY) -> None:
        self.api_key = api_key
        self.base_url = ""
        self.requests: list[TranscriptionRequest] = []
        self.transcripts: dict[bytes, str] = {}
        self._failures: list[int] = []
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeOpenAIAudio:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def fail_next(self, status: int = 500) -> None:
        self._failures.append(status)

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload: Any = form.get("file")
        authorization = request.headers.get("Authorization", "")
        language = form.get("language")
        if isinstance(upload, web.FileField):
            self.requests.append(
                TranscriptionRequest(
                    upload.filename,
                    str(form.get("model", "")),
                    upload.file.read(),
                    authorization,
                    language if isinstance(language, str) else None,
                )
            )
        if authorization != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided")
        if self._failures:
            return _error(self._failures.pop(0), "scripted failure")
        if not isinstance(upload, web.FileField) or "model" not in form:
            return _error(400, "file and model are required")
        if upload.filename.rpartition(".")[2].lower() not in AUDIO_SUFFIXES:
            return _error(400, f"Invalid file format. Supported formats: {list(AUDIO_SUFFIXES)}")
        text = self.transcripts.get(self.requests[-1].data, "hello from voice")
        return web.json_response({"text": text})


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error"}}, status=status
    )
