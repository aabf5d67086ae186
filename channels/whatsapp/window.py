"""WhatsApp's 24-hour customer-service window, and the messages held outside it.

A business may send free-form messages to a person only within 24 hours of that person's
last message; outside it the Cloud API refuses them (error 131047, "re-engagement message"),
at once or later in a `failed` status callback. Cron wake-ups and heartbeats often fall
outside. Such a message is never dropped: `HeldMessages` keeps it (in a JSON file in the
daemon's state directory when there is one, so a restart keeps it too), `perch status`
reports how many wait, and they are sent, oldest first, as soon as the person writes again.

`ServiceWindow` remembers when each person last wrote (since this start), so a message known
to fall outside is held without a call that would fail.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger("channels.whatsapp")

WINDOW_S = 24 * 3600.0
_MARGIN_S = 60.0  # a message sent in the window's last minute may arrive after it closed


@dataclass(frozen=True, slots=True)
class Held:
    """A reply (Markdown) for `to` that waits for the window to open again."""

    to: str
    text: str
    held_at: float


class ServiceWindow:
    """When each person last wrote; `closed(wa_id)` is True only when that is known."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def opened(self, wa_id: str, at: float | None = None) -> None:
        self._last[wa_id] = time.time() if at is None else at

    def closed(self, wa_id: str, now: float | None = None) -> bool:
        last = self._last.get(wa_id)
        if last is None:
            return False  # not seen since this start: the API will say
        return (time.time() if now is None else now) - last > WINDOW_S - _MARGIN_S


class HeldMessages:
    """The held replies, in the order they were held; saved to `path` (if any) on change."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._held: list[Held] = self._load()

    def _load(self) -> list[Held]:
        if self._path is None or not self._path.exists():
            return []
        try:
            rows = json.loads(self._path.read_text(encoding="utf-8"))
            return [Held(str(r["to"]), str(r["text"]), float(r["held_at"])) for r in rows]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error(
                "WhatsApp: the held messages in %s cannot be read (%s); kept aside as %s.bad",
                self._path,
                exc,
                self._path.name,
            )
            self._path.replace(self._path.with_name(self._path.name + ".bad"))
            return []

    def _save(self) -> None:
        if self._path is None:
            return
        temporary = self._path.with_name(self._path.name + ".tmp")
        data = json.dumps([asdict(h) for h in self._held], ensure_ascii=False)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(self._path)

    def hold(self, to: str, text: str) -> None:
        self._held.append(Held(to, text, time.time()))
        self._save()
        log.warning(
            "WhatsApp: a message to %s is outside the 24-hour window; held until they write "
            "(%d held in all)",
            to,
            len(self._held),
        )

    def take(self, to: str) -> list[Held]:
        """Remove and return what waits for `to`, oldest first."""
        mine = [h for h in self._held if h.to == to]
        if mine:
            self._held = [h for h in self._held if h.to != to]
            self._save()
        return mine

    def put_back(self, items: list[Held]) -> None:
        """Return items that could not be sent after all, keeping their order first."""
        if items:
            self._held = [*items, *self._held]
            self._save()

    def __len__(self) -> int:
        return len(self._held)

    def recipients(self) -> int:
        return len({h.to for h in self._held})
