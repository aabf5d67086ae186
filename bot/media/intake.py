"""What a turn makes of attachments: voice notes transcribed, documents read or saved.

`MediaIntake.prepare(inbound)` returns the inbound with its attachments turned into text:
`[voice transcript] ...` after the caption, a `[file NAME]` block for text-like files (and
PDFs, via pypdf) up to `media.documents.max_chars`, and `[file saved: inbox/<date>/NAME]` for
anything else, created through the one opener (`agents.workspace_files.create_new`: beneath
the workspace, no symlink followed, never overwriting a file). When a voice note
cannot be understood (no speech-to-text configured, over the size or duration cap, the
service failed) and nothing else came with it, `Prepared.notice` is the plain one-line answer
to send instead of running the model; with other content, a short marker takes its place.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.workspace_files import TakenByLink, create_new
from bot.config.media import MediaConfig, transcription_endpoint
from bot.config.schema import Config
from bot.media.transcription import Transcriber, TranscriptionFailed
from channels.base import Attachment, Inbound

log = logging.getLogger(__name__)

VOICE_OFF = "Voice messages aren't set up here yet; please type your message instead."
TEXT_SUFFIXES = frozenset(
    [
        "txt",
        "md",
        "markdown",
        "csv",
        "tsv",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "log",
        "xml",
        "html",
        "htm",
        "css",
        "js",
        "ts",
        "tsx",
        "jsx",
        "py",
        "rb",
        "go",
        "rs",
        "java",
        "kt",
        "c",
        "h",
        "cpp",
        "hpp",
        "cs",
        "php",
        "sh",
        "bash",
        "zsh",
        "sql",
        "swift",
        "lua",
        "r",
        "pl",
        "tex",
        "rst",
        "env",
        "properties",
        "gradle",
        "dockerfile",
        "makefile",
    ]
)
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


@dataclass(frozen=True, slots=True)
class Prepared:
    inbound: Inbound
    notice: str = ""  # a plain answer to send instead of running the model
    heard: bool = False  # a voice note was transcribed (agent.voice.reply: auto answers aloud)


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f}".removesuffix(".0") + " MB"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}".removesuffix(".0") + " min"


class MediaIntake:
    """Turns attachments into turn text (see the module docstring). One per daemon."""

    def __init__(
        self, media: MediaConfig, transcriber: Transcriber | None, workspace: Path
    ) -> None:
        self._media = media
        self._transcriber = transcriber
        self._workspace = workspace

    @classmethod
    def from_config(cls, config: Config) -> MediaIntake:
        """Raises ValueError naming the key when `media.transcription` names no usable provider."""
        endpoint = transcription_endpoint(config.media.transcription, config.providers)
        settings = config.media.transcription
        transcriber = None
        if endpoint is not None and settings is not None:
            transcriber = Transcriber(
                endpoint, language=settings.language, timeout=settings.timeout_s
            )
        return cls(config.media, transcriber, config.workspace)

    async def prepare(self, inbound: Inbound) -> Prepared:
        if not inbound.attachments:
            return Prepared(inbound)
        parts: list[str] = [inbound.text] if inbound.text.strip() else []
        problems: list[str] = []
        heard = False
        for attachment in inbound.attachments:
            if attachment.kind == "audio":
                text, problem = await self._voice(attachment)
                if text:
                    parts.append(f"[voice transcript] {text}")
                    heard = True
                if problem:
                    problems.append(problem)
            else:
                parts.append(await asyncio.to_thread(self._document, attachment))
        if problems and not parts and not inbound.images:
            return Prepared(dataclasses.replace(inbound, attachments=()), " ".join(problems))
        parts.extend(f"[voice message not understood: {p}]" for p in problems)
        text = "\n\n".join(parts)
        return Prepared(dataclasses.replace(inbound, text=text, attachments=()), heard=heard)

    async def _voice(self, audio: Attachment) -> tuple[str, str]:
        """(transcript, problem): one of them empty."""
        settings = self._media.transcription
        if self._transcriber is None or settings is None:
            return "", VOICE_OFF
        size = len(audio.data) if audio.data is not None else audio.size
        if audio.data is None or (size is not None and size > settings.max_bytes):
            shown = _megabytes(size) if size else "too large to download"
            return "", (
                f"That voice message is too large for me ({shown}, limit "
                f"{_megabytes(settings.max_bytes)}); please send a shorter one or type it."
            )
        if audio.duration_s is not None and audio.duration_s > settings.max_duration_s:
            return "", (
                f"That voice message is too long for me ({_minutes(audio.duration_s)}, limit "
                f"{_minutes(settings.max_duration_s)}); please send a shorter one or type it."
            )
        try:
            text = await self._transcriber.transcribe(audio.data, audio.name, audio.media_type)
        except TranscriptionFailed as exc:
            return "", f"I couldn't transcribe that voice message ({exc}); please type it."
        if not text:
            return "", "I couldn't hear any words in that voice message; please try again."
        return text, ""

    def _document(self, file: Attachment) -> str:
        name = _safe_name(file.name)
        if file.data is None:
            shown = f" ({_megabytes(file.size)})" if file.size else ""
            return f"[file {name}{shown} could not be downloaded; it may be over the size limit]"
        limit = self._media.documents.max_chars
        text = _as_text(file, name)
        if text is not None:
            if len(text) > limit:
                text = text[:limit] + f"\n[... truncated: {limit:,} of {len(text):,} characters]"
            return f"[file {name}]\n{text}\n[end of file {name}]"
        return self._save(file, name)

    def _save(self, file: Attachment, name: str) -> str:
        assert file.data is not None
        workspace = self._workspace
        folder = (*Path(self._media.documents.inbox).parts, time.strftime("%Y-%m-%d"))
        stem, dot, suffix = name.rpartition(".")
        for n in range(1, 1000):
            candidate = name if n == 1 else (f"{stem}-{n}.{suffix}" if dot else f"{name}-{n}")
            shown = "/".join((*folder, candidate))
            try:
                if create_new(workspace, (*folder, candidate), file.data):
                    break
            except TakenByLink:
                continue  # a link where the file would go: never followed, another name
            except OSError as exc:
                problem = getattr(exc, "why", None) or exc.strerror or str(exc)
                log.warning("could not save an attachment as %s: %s", shown, problem)
                return f"[file {name} could not be saved: {problem}]"
        else:
            return f"[file {name} could not be saved: 999 files of that name today]"
        return (
            f"[file saved: {shown} ({file.media_type or 'unknown type'}, {len(file.data):,} bytes)]"
        )


def _safe_name(name: str) -> str:
    """A plain file name: no folders, no control or odd characters, not hidden, not empty."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).strip(" .")[:120]
    return cleaned or "file"


def _as_text(file: Attachment, name: str) -> str | None:
    """The text of a text-like file or PDF, or None for anything else."""
    assert file.data is not None
    suffix = name.rpartition(".")[2].lower() if "." in name else name.lower()
    media_type = file.media_type.split(";")[0].strip().lower()
    if media_type == "application/pdf" or suffix == "pdf":
        return _pdf_text(file.data)
    if suffix in TEXT_SUFFIXES or media_type.startswith(TEXT_TYPES):
        if b"\x00" in file.data[:8192]:
            return None
        return file.data.decode("utf-8", errors="replace")
    return None


def _pdf_text(data: bytes) -> str | None:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, OSError, KeyError, TypeError) as exc:
        log.info("PDF text extraction failed: %s", type(exc).__name__)
        return None
    text = "\n\n".join(p.strip() for p in pages).strip()
    return text or None


def attachments_to_payload(attachments: Iterable[Attachment]) -> list[dict[str, Any]]:
    """Attachments as JSON for the inbox (crash recovery re-runs them)."""
    return [
        {
            "kind": a.kind,
            "name": a.name,
            "media_type": a.media_type,
            "data": base64.b64encode(a.data).decode("ascii") if a.data is not None else None,
            "size": a.size,
            "duration_s": a.duration_s,
        }
        for a in attachments
    ]


def attachments_from_payload(items: Iterable[dict[str, Any]]) -> tuple[Attachment, ...]:
    """The inverse of `attachments_to_payload` (KeyError/TypeError/ValueError if mangled)."""
    return tuple(
        Attachment(
            kind="audio" if item["kind"] == "audio" else "file",
            name=str(item["name"]),
            media_type=str(item["media_type"]),
            data=base64.b64decode(item["data"]) if item.get("data") is not None else None,
            size=item.get("size"),
            duration_s=item.get("duration_s"),
        )
        for item in items
    )
