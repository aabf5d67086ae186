"""Audio of any format made into a voice note: OGG/Opus, 48 kHz, mono (what Telegram's
`sendVoice`, Signal's and WhatsApp's voice notes and Discord's voice messages play).

`to_voice_note(audio)` decodes whatever a speech engine returned (WAV, MP3, Opus, FLAC ...)
with PyAV, whose wheel carries its own FFmpeg and libopus (no system ffmpeg), and encodes it
again. It is CPU work: call it in a thread. Audio that cannot be decoded raises
`UnplayableAudio`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import av.error

RATE = 48_000


class UnplayableAudio(Exception):
    """The bytes were not audio PyAV could decode, or held no sound."""


@dataclass(frozen=True, slots=True)
class VoiceNote:
    data: bytes  # OGG/Opus
    duration_s: float


def to_voice_note(audio: bytes) -> VoiceNote:
    """`audio` (any format FFmpeg reads) as OGG/Opus, 48 kHz mono; raises `UnplayableAudio`."""
    out = io.BytesIO()
    samples = 0
    try:
        with (
            av.open(io.BytesIO(audio), mode="r") as source,
            av.open(out, mode="w", format="ogg") as target,
        ):
            if not source.streams.audio:
                raise UnplayableAudio("no audio stream")
            stream = target.add_stream("libopus", rate=RATE, layout="mono")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
            for frame in [*source.decode(audio=0), None]:
                for chunk in resampler.resample(frame):
                    samples += chunk.samples
                    target.mux(stream.encode(chunk))
            target.mux(stream.encode(None))
    except (av.error.FFmpegError, ValueError) as exc:
        raise UnplayableAudio(type(exc).__name__) from None
    if samples == 0:
        raise UnplayableAudio("no sound")
    return VoiceNote(out.getvalue(), samples / RATE)
