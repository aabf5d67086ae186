"""What is never shown: passwords and tokens, whatever key of the config holds them.

`secret_values(tree)` lists the strings of a parsed config that are secrets: every value read
from a `${file:}`/`${cred:}` file, every string under a key that names a credential (`token`,
`api_key`, `password`, `Authorization`, ...), and the password of any URL. `scrub(text, secrets)`
takes them (and anything shaped like a credential: a URL's password, `Bearer ...`, `sk-...`)
out of a line before it is printed: config errors, `perch doctor` and the log use it.
`may_echo(key, value)` says whether an error message may quote a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from bot.config.secrets import SecretText

REDACTED = "[REDACTED]"
_SECRET_KEY = re.compile(
    r"token|secret|passw|^pass$|api[_-]?key|private[_-]?key|credential|auth|cookie|dsn",
    re.IGNORECASE,
)
# scheme://user:PASSWORD@host: the password group is replaced.
URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*:)([^/\s@'\"]+)(@)")
# A reference a lenient load left unresolved (`${SLACK_BOT}`): no secret, and the line naming
# it must stay readable.
_UNRESOLVED = re.compile(r"\$\{[^}]*\}")
TOKEN_SHAPES = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\b(?:sk-|sk_live_|xox[abpors]-|xapp-|ghp_|gho_|github_pat_|glpat-)[\w-]{6,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
)


def is_reference(value: str) -> bool:
    """A `${...}` a lenient load left unresolved: no secret, and a line naming it stays."""
    return bool(_UNRESOLVED.fullmatch(value))


def looks_secret_key(key: str) -> bool:
    """True when a config key's own name says it holds a credential."""
    return bool(_SECRET_KEY.search(key.rsplit(".", 1)[-1].split("[", 1)[0]))


def looks_secret_value(value: str) -> bool:
    """True when a value is shaped like a credential (a URL with a password, a token)."""
    return bool(URL_PASSWORD.search(value) or any(p.search(value) for p in TOKEN_SHAPES))


def may_echo(key: str, value: object) -> bool:
    """Whether an error message may quote `value`, found at config key `key`."""
    if isinstance(value, SecretText) or looks_secret_key(key):
        return False
    return not (isinstance(value, str) and looks_secret_value(value))


def secret_values(tree: Any, key: str = "") -> list[str]:
    """Every secret string in a parsed (interpolated) config tree."""
    found: list[str] = []
    if isinstance(tree, dict):
        for name, value in tree.items():
            found += secret_values(value, f"{key}.{name}" if key else str(name))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            found += secret_values(value, f"{key}[{i}]")
    elif isinstance(tree, str) and tree and not is_reference(tree):
        if isinstance(tree, SecretText) or looks_secret_key(key):
            found.append(str(tree))
            found += tree.split()[1:]  # the token of "Bearer <token>"
        try:
            password = urlsplit(tree).password if "://" in tree else None
        except ValueError:
            password = None
        if password:
            found.append(password)
    return found


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the given secrets and every credential-shaped piece redacted."""
    for secret in sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = URL_PASSWORD.sub(lambda m: m.group(1) + "***" + m.group(3), text)
    for pattern in TOKEN_SHAPES:
        text = pattern.sub(_redacted, text)
    return text


def _redacted(match: re.Match[str]) -> str:
    """The match redacted; a prefix group (the "Bearer " before a token) stays."""
    return (match.group(1) if match.re.groups else "") + REDACTED
