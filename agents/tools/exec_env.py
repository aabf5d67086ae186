"""What a command started by `exec` finds in its environment: nothing that looks like a secret.

`build_env(workspace, allow_env)` gives PATH, LANG, TZ, HOME=workspace and the allow-listed
names, never a name that looks like it holds a secret (`*TOKEN*`, `*KEY*`, ...) nor a value
that does (a URL with a password, well-known token prefixes, a private key).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

SECRET_MARKERS = (
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
)
# Values that carry a credential whatever their variable is called: a URL with a password
# (`postgres://user:pass@host`), well-known token prefixes, PEM private keys.
_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"
    r"|^(sk-|sk_live_|xox[abpors]-|xapp-|ghp_|gho_|github_pat_|glpat-|AKIA[0-9A-Z]{12})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def is_secret_name(name: str) -> bool:
    """True if an environment variable name looks like it holds a secret."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def looks_like_secret_value(value: str) -> bool:
    """True if a value looks like a credential (URL with a password, token, private key)."""
    return _SECRET_VALUE.search(value) is not None


def build_env(
    workspace: Path, allow_env: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command sees: PATH, HOME, LANG, TZ and allowed non-secret names."""
    src = os.environ if source is None else source
    env = {
        name: src[name]
        for name in allow_env
        if name in src and not is_secret_name(name) and not looks_like_secret_value(src[name])
    }
    env["PATH"] = src.get("PATH") or DEFAULT_PATH
    env["LANG"] = src.get("LANG") or "C.UTF-8"
    if src.get("TZ"):
        env["TZ"] = src["TZ"]
    env["HOME"] = str(workspace)
    return env
