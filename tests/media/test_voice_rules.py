"""Spoken replies' rules and parts, without a chat: when a reply is spoken, how a long one is
cut (hypothesis), what is read aloud, the provider's config errors, the local engine with
hostile text, and audio that is no audio."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import av
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config.errors import ConfigError
from bot.media.chat import ChatMedia
from bot.media.opus import UnplayableAudio, to_voice_note
from bot.media.speech import EspeakSpeech
from bot.media.voice_reply import should_speak, speakable, split_for_voice
from tests.harness import make_config


@pytest.mark.parametrize(
    ("reply", "heard", "spoken"),
    [
        ("auto", True, True),
        ("auto", False, False),
        ("always", True, True),
        ("always", False, True),
        ("never", True, False),
        ("never", False, False),
    ],
)
def test_which_replies_are_spoken(reply: str, heard: bool, spoken: bool) -> None:
    assert should_speak(reply, heard) is spoken


_words = st.text(alphabet=st.sampled_from("abc xyz.,!\n*#-"), min_size=0, max_size=600)
_fenced = st.tuples(_words, _words, _words).map(lambda p: f"{p[0]}\n```py\n{p[1]}\n```\n{p[2]}")


@settings(max_examples=150)
@given(text=st.one_of(_words, _fenced), max_chars=st.integers(50, 400))
def test_a_reply_is_cut_for_voice_within_max_chars_and_nothing_is_lost(
    text: str, max_chars: int
) -> None:
    spoken, rest = split_for_voice(text, max_chars)
    assert len(spoken) <= max_chars
    if len(text) <= max_chars:
        assert (spoken, rest) == (text, "")
        return
    # Every word of the reply is in the spoken part or the rest, in order (the cut adds at
    # most fence lines around it).
    words = re.findall(r"[a-z.,!]+", re.sub(r"```\w*", " ", text))
    fence_free = re.sub(r"```\w*", " ", spoken + "\n" + rest)
    assert re.findall(r"[a-z.,!]+", fence_free) == words


def test_what_is_read_aloud_leaves_out_markup_and_addresses() -> None:
    text = "## Plan\n\n**Go** to [the shop](https://shop.example/x) or https://other.example now."
    assert speakable(text) == "Plan\n\nGo to the shop or now."


def test_voice_provider_must_name_an_openai_kind_provider_or_a_local_engine(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9", {"agent.voice": {"provider": "nope"}})
    with pytest.raises(ConfigError, match=r"agent\.voice\.provider: no provider 'nope'"):
        ChatMedia(config, {})
    config = make_config(tmp_path, "http://127.0.0.1:9", {"agent.voice": {"provider": "anthropic"}})
    with pytest.raises(ConfigError, match="text-to-speech needs a provider of kind: openai"):
        ChatMedia(config, {})
    config = make_config(tmp_path, "http://127.0.0.1:9", {"agent.voice": {"provider": "espeak"}})
    ChatMedia(config, {})  # the local engine needs no providers: entry


def test_audio_that_is_no_audio_is_refused_plainly() -> None:
    for junk in (b"", b"not audio at all" * 20, b"RIFF" + b"\x00" * 40):
        with pytest.raises(UnplayableAudio):
            to_voice_note(junk)


@pytest.mark.skipif(not EspeakSpeech.installed(), reason="espeak-ng is not installed here")
async def test_espeak_reads_text_that_looks_like_options_as_text(tmp_path: Path) -> None:
    engine = EspeakSpeech("en")
    target = tmp_path / "owned.wav"
    audio = await engine.synthesize(f"--version -w {target} hello")
    note = to_voice_note(audio)
    assert note.duration_s > 1.0  # the words were spoken, not taken as options
    assert not await asyncio.to_thread(target.exists)
    with av.open(io.BytesIO(note.data)) as container:
        assert container.streams.audio[0].codec_context.name == "opus"
