"""What the index holds, made from what Perch has: pure builders of `SearchDocument`s.

- A memory file (its template comments left out, as the prompt leaves them) is cut into notes: a bullet with its continuation lines (the bullet mark
  left out), or a paragraph; under a heading (but a day's own), the heading goes in front
  (`(Family) Ada is my sister`); a long one is cut
  at `MAX_NOTE_CHARS`. A note of a dated file (`memory/2026-05-01.md`) written by
  `memory_append` (`- 14:05 ...`) is dated to that minute, local time; others take the
  file's modification time. Each file is one group (replaced whole when it changes).
- A conversation's messages, each one document of its session's group, in the scope of its
  chat (`bot/recall/visibility.py`): the user's own words, or the assistant's text as it
  was sent (`agents.recall.indexable_text`). The ref is a digest of the session, the role and
  the text, so a message indexed as its run is saved and again by a rebuild is one
  document, and the same words said twice in a session are found once. A session's summary
  (what compaction kept of older messages) is one more document of its group.
- A skill: its name, description and instructions, `public`, all skills one group.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from agents.model import Message
from agents.persona_text import clean_persona
from agents.recall import indexable_text
from agents.skills.skill import Skill
from bot.kernel.sessions import SessionKey
from bot.recall.visibility import OWNER, PUBLIC, scope_of
from bot.store.search_rows import SearchDocument

MAX_NOTE_CHARS = 1_500
MAX_SKILL_CHARS = 12_000
SKILLS_GROUP = "skills"
_BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_DATED = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})\.md$")
_AT_MINUTE = re.compile(r"^\s{0,3}[-*+]\s+(\d{2}):(\d{2})\s")
_DAY_HEADING = re.compile(r"\d{4}-\d{2}-\d{2}")


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=12).hexdigest()


def memory_notes(path: str, text: str, mtime: float) -> list[SearchDocument]:
    """The notes of one memory file (`path` as shown: `MEMORY.md`, `memory/<day>.md`)."""
    day = _DATED.search(path)
    notes: list[tuple[str, float]] = []
    heading = ""
    current: list[str] = []
    current_at = mtime

    def close() -> None:
        body = " ".join(" ".join(current).split())
        if body:
            prefix = f"({heading}) " if heading else ""
            for start in range(0, len(body), MAX_NOTE_CHARS):
                notes.append((prefix + body[start : start + MAX_NOTE_CHARS], current_at))
        current.clear()

    for line in clean_persona(text).splitlines():
        title = _HEADING.match(line)
        if title:
            close()
            heading = "" if _DAY_HEADING.fullmatch(title.group(1)) else title.group(1)
            continue
        if not line.strip():
            close()
            continue
        bullet = _BULLET.match(line)
        if bullet:
            close()
            current_at = _note_time(day, line, mtime)
            line = line[bullet.end() :]
            if current_at != mtime:
                line = line[5:]  # the time memory_append wrote: the note's date has it
        elif not current:
            current_at = mtime
        current.append(line.strip())
    close()
    return [
        SearchDocument("memory", f"{path}#{n}", path, OWNER, path, note, at)
        for n, (note, at) in enumerate(notes, start=1)
    ]


def _note_time(day: re.Match[str] | None, line: str, mtime: float) -> float:
    minute = _AT_MINUTE.match(line)
    if day is None or minute is None:
        return mtime
    try:
        year, month, date = (int(g) for g in day.groups())
        moment = datetime(year, month, date, int(minute.group(1)), int(minute.group(2)))
        return moment.astimezone().timestamp()  # memory_append writes local time
    except ValueError:
        return mtime


def conversation_documents(
    key: SessionKey, session_id: str, messages: Iterable[Message], at: float
) -> list[SearchDocument]:
    """One document per message of `messages` with text worth finding."""
    return [doc for m in messages if (doc := message_document(key, session_id, m, at))]


def message_document(
    key: SessionKey, session_id: str, message: Message, at: float
) -> SearchDocument | None:
    text = indexable_text(message)
    if not text:
        return None
    role = message["role"]
    ref = f"{session_id}:{_digest(session_id, role, text)}"
    return SearchDocument("sessions", ref, session_id, scope_of(key), role, text, at)


def summary_document(key: SessionKey, session_id: str, summary: str, at: float) -> SearchDocument:
    return SearchDocument(
        "sessions", f"{session_id}:summary", session_id, scope_of(key), "summary", summary, at
    )


def skill_documents(skills: Sequence[Skill]) -> tuple[list[SearchDocument], str]:
    """The usable skills as documents, and a stamp that changes when any of them does."""
    docs = []
    for skill in sorted((s for s in skills if s.available), key=lambda s: s.name):
        text = f"{skill.name}: {skill.description}\n\n{skill.body()[:MAX_SKILL_CHARS]}"
        docs.append(SearchDocument("skills", skill.name, SKILLS_GROUP, PUBLIC, skill.name, text))
    stamp = _digest(*(f"{d.ref}\x1e{d.text}" for d in docs))
    return docs, stamp
