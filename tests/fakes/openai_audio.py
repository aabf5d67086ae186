"""A fake OpenAI-compatible speech server (speech to text and text to speech) on 127.0.0.1.

Serves `POST /v1/audio/transcriptions` as the real API does: a multipart form with `file` and
`model`, a Bearer key, a 400 for a file name without an audio extension, and `{"text": ...}`
on success. `transcripts` maps audio bytes to the text to answer (default: "hello from
voice"); `fail_next(status)` scripts an error (of either endpoint). Every request is kept in
`requests`.

And `POST /v1/audio/speech`: JSON `{model, input, voice, response_format, speed}`, a Bearer
key; it answers real audio in the format asked for (`wav` or raw 24 kHz 16-bit `pcm` written
here; `mp3`, `opus`, `flac`, `aac` encoded with PyAV): a tone whose length grows with the
input, 440 Hz. Every request is kept in `speech_requests`.
"""

from __future__ import annotations

import io
import math
import struct
import wave
from dataclasses import dataclass
from typing import Any

import av
import numpy
from aiohttp import web

API_KEY = "sk-test-audio"
SPEECH_RATE = 24_000  # what OpenAI's `pcm` format is
SPEECH_FORMATS = {  # response_format -> (container, codec) for PyAV
    "mp3": ("mp3", "mp3"),
    "opus": ("ogg", "libopus"),
    "flac": ("flac", "flac"),
    "aac": ("adts", "aac"),
}
AUDIO_SUFFIXES = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")


@dataclass(frozen=True)
class TranscriptionRequest:
    filename: str
    model: str
    data: bytes
    authorization: str
    language: str | None


@dataclass(frozen=True)
class SpeechRequest:
    model: str
    input: str
    voice: str
    response_format: str
    speed: float | None
    authorization: str


class FakeOpenAIAudio:
    """`async with FakeOpenAIAudio() as stt:` then use `stt.base_url` (ends in /v1)."""

    def __init__(self, api_key: str = API_KEY) -> None:
        self.api_key = api_key
        self.base_url = ""
        self.requests: list[TranscriptionRequest] = []
        self.transcripts: dict[bytes, str] = {}
        self.speech_requests: list[SpeechRequest] = []
        self._failures: list[int] = []
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeOpenAIAudio:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
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

    async def _speak(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization", "")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body must be JSON")
        fmt = str(body.get("response_format", "mp3"))
        speed = body.get("speed")
        self.speech_requests.append(
            SpeechRequest(
                str(body.get("model", "")),
                str(body.get("input", "")),
                str(body.get("voice", "")),
                fmt,
                float(speed) if isinstance(speed, int | float) else None,
                authorization,
            )
        )
        if authorization != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided")
        if self._failures:
            return _error(self._failures.pop(0), "scripted failure")
        if not body.get("input") or not body.get("model") or not body.get("voice"):
            return _error(400, "model, input and voice are required")
        if fmt not in ("wav", "pcm", *SPEECH_FORMATS):
            return _error(400, f"Invalid response_format {fmt!r}")
        pcm = tone(min(10.0, 0.3 + 0.02 * len(body["input"])))
        return web.Response(body=encode_speech(pcm, fmt), content_type=f"audio/{fmt}")


def tone(seconds: float, hertz: float = 440.0) -> bytes:
    """16-bit mono PCM at `SPEECH_RATE`: a sine tone at half volume."""
    count = int(seconds * SPEECH_RATE)
    step = 2 * math.pi * hertz / SPEECH_RATE
    return struct.pack(f"<{count}h", *(int(16000 * math.sin(i * step)) for i in range(count)))


def encode_speech(pcm: bytes, fmt: str) -> bytes:
    """`pcm` (16-bit mono at `SPEECH_RATE`) in the response format the API names."""
    if fmt == "pcm":
        return pcm
    out = io.BytesIO()
    if fmt == "wav":
        with wave.open(out, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(SPEECH_RATE)
            wav.writeframes(pcm)
        return out.getvalue()
    container, codec = SPEECH_FORMATS[fmt]
    with av.open(out, mode="w", format=container) as target:
        stream = target.add_stream(codec, rate=48_000 if codec == "libopus" else SPEECH_RATE)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(
            numpy.frombuffer(pcm, "<i2").reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = SPEECH_RATE
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=stream.rate)
        for piece in [*resampler.resample(frame), *resampler.resample(None)]:
            target.mux(stream.encode(piece))
        target.mux(stream.encode(None))
    return out.getvalue()


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error"}}, status=status
    )
