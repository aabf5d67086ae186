"""One `perch doctor` check: passed or not, what was found, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    name: str
    detail: str
    fix: str = ""
    warn: bool = False  # passed, but worth the owner's attention (shown with its fix)

    def line(self) -> str:
        label = "WARN" if self.ok and self.warn else ("OK  " if self.ok else "FAIL")
        text = f"{label}  {self.name}: {self.detail}"
        if (not self.ok or self.warn) and self.fix:
            text += f" -> {self.fix}"
        return text
