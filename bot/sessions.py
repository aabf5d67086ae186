"""The public name of session keys (DESIGN.md section 10): `bot.sessions.SessionKey`.

The module itself is the kernel's, `bot/kernel/sessions.py`; this path stays so that scripts and
tests outside the package keep importing `SessionKey.parse(s)` / `str(key)` from here. Code
inside Perch imports `bot.kernel.sessions`.
"""

from bot.kernel.sessions import MAX_DEPTH, MAX_KEY_CHARS, RESERVED_CHANNELS, SessionKey

__all__ = ["MAX_DEPTH", "MAX_KEY_CHARS", "RESERVED_CHANNELS", "SessionKey"]
