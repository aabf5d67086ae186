"""What is never shown: passwords and tokens, whatever key of the config holds them.

**The one redactor of every output**: `Redactor(secrets)` (and `scrub(text, secrets)`, the
same as one call) is what the log (`bot/process/logs.py`: perch.log, stderr, the dashboard's
Logs page and its live stream), the CLI (`status`, `doctor`, `run`'s start line, `store`),
config errors, tool results (the agent loop's `redact` hook) and traces go through. It hides:
- every configured secret (`Config.secret_values()`: keys, tokens, headers, the values of
  every MCP server's `env`, every `${file:}`/`${cred:}` value);
- the password of every URL and DSN however written (`mask_credentials`): the userinfo's
  password (`scheme://user:PASSWORD@host`, the password holding `/`, `#`, `?`, `:` or `@`:
  it runs to the last `@` before the host, so an address with a raw `@` after its path, an
  e-mail in a query, loses what lies between its port and that `@`: masked rather than
  leaked), password parameters (`?password=`,
  `&sslpassword=`, a libpq keyword DSN's `password=...` quoted or not, `PGPASSWORD=`,
  `"password": "..."`), and token shapes (`Bearer ...`, `Basic ...`, `sk-...`, the ones each
  channel plug-in declares).
`secret_values(tree)` lists the strings of a parsed config that are secrets: every value read
from a `${file:}`/`${cred:}` file, every string under a key that names a credential (`token`,
`api_key`, `password`, `Authorization`, ...), and the password of any URL.
`may_echo(key, value)` says whether an error message may quote a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from bot.config.secrets import SecretText
from channels import registry

REDACTED = "[REDACTED]"
_SECRET_KEY = re.compile(
    r"token|secret|passw|^pass$|api[_-]?key|private[_-]?key|credential|auth|cookie|dsn",
    re.IGNORECASE,
)
# scheme://user:PASSWORD@host: the password group is replaced. The password runs to the last
# `@` of the address, so a raw `/`, `#`, `?`, `:` or `@` in it is still inside.
URL_PASSWORD = re.compile(
    r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"<>]*:)([^\s'\"<>]+?)(@)(?=[^\s'\"<>@]*(?:[\s'\"<>]|$))"
)
# A password given as a parameter: `?password=`, `sslpassword=`, `PGPASSWORD=`, libpq's
# `password='a b'`, JSON's `"password": "..."`.
PASSWORD_PARAM = re.compile(
    r"(?i)((?<![A-Za-z0-9])[\"']?(?:[A-Za-z0-9]*_|ssl|pg|db)?(?:pass(?:word|wd|phrase)?|pwd)[\"']?\s*[=:]\s*)"
    r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\"<>)}\]]+)"
)
# A reference a lenient load left unresolved (`${SLACK_BOT}`): no secret, and the line naming
# it must stay readable.
_UNRESOLVED = re.compile(r"\$\{[^}]*\}")
TOKEN_SHAPES = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    # HTTP Basic credentials (base64 with a digit, `+`, `/` or `=` in it: not "Basic Information")
    re.compile(r"(\b[Bb]asic\s+)(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/=]{8,}"),
    re.compile(r"(?i)(x-api-key['\"]?\s*[:=]\s*['\"]?)[A-Za-z0-9._-]{8,}"),
    re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}"),
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
    return mask_credentials(value) != value


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


def mask_credentials(text: str) -> str:
    """`text` with every URL's and DSN's password and every token shape masked."""
    if "://" in text:
        text = URL_PASSWORD.sub(lambda m: m.group(1) + "***" + m.group(3), text)
    text = PASSWORD_PARAM.sub(_masked_param, text)
    for pattern in (*TOKEN_SHAPES, *registry.redaction_patterns()):
        text = pattern.sub(_redacted, text)
    return text


class Redactor:
    """The one redactor: configured `secrets` (6 characters or more) become `[REDACTED]`,
    then `mask_credentials`. Callable on a line; `add` takes more secrets later."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        known = {*self.secrets, *(s for s in secrets if s and len(s) >= 6 and s.strip())}
        self.secrets = sorted(known, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return mask_credentials(text)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the given secrets and every credential-shaped piece redacted."""
    return Redactor(secrets)(text)


def _masked_param(match: re.Match[str]) -> str:
    value = match.group(2)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return match.group(1) + quote + "***" + quote


def _redacted(match: re.Match[str]) -> str:
    """The match redacted; a prefix group (the "Bearer " before a token) stays."""
    return (match.group(1) if match.re.groups else "") + REDACTED
