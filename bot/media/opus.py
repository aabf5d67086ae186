"""Audio of any format made into a voice note: OGG/Opus, 48 kHz, mono (what the chat
platforms' voice notes and voice messages play).

`to_voice_note(audio)` decodes whatever a speech engine returned (WAV, MP3, Opus, FLAC ...)
with PyAV, whose wheel carries its own FFmpeg and libopus (no system ffmpeg), and encodes it
again, and samples its loudness as a waveform (at most 256 levels 0-255, what some
platforms draw beside a voice message). It is CPU work: call it in a thread. Audio that
cannot be decoded raises `UnplayableAudio`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy

RATE = 48_000
WAVEFORM_POINTS = 256


class UnplayableAudio(Exception):
    """The bytes were not audio PyAV could decode, or held no sound."""


@dataclass(frozen=True, slots=True)
class VoiceNote:
    data: bytes  # OGG/Opus
    duration_s: float
    waveform: bytes = b""  # loudness over time, at most 256 levels 0-255


def to_voice_note(audio: bytes) -> VoiceNote:
    """`audio` (any format FFmpeg reads) as OGG/Opus, 48 kHz mono; raises `UnplayableAudio`."""
    import av  # PyAV: imported at the first voice note, not with the daemon
    import av.error

    out = io.BytesIO()
    samples = 0
    peaks: list[int] = []
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
                    peaks.append(int(numpy.abs(chunk.to_ndarray().astype(numpy.int32)).max()))
                    target.mux(stream.encode(chunk))
            target.mux(stream.encode(None))
    except (av.error.FFmpegError, ValueError) as exc:
        raise UnplayableAudio(type(exc).__name__) from None
    if samples == 0:
        raise UnplayableAudio("no sound")
    return VoiceNote(out.getvalue(), samples / RATE, waveform_of(peaks))


def waveform_of(peaks: list[int]) -> bytes:
    """Peaks (0-32768) as at most `WAVEFORM_POINTS` levels 0-255, each the loudest of its
    stretch, scaled so the loudest is 255."""
    if not peaks:
        return b""
    size = -(-len(peaks) // WAVEFORM_POINTS)  # peaks per point, rounded up
    points = [max(peaks[i : i + size]) for i in range(0, len(peaks), size)]
    top = max(points) or 1
    return bytes(min(255, point * 255 // top) for point in points)
