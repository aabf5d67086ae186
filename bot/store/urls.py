"""Store addresses: telling a PostgreSQL URL from a file path, and showing one safely.

`redact_url` drops the password from a URL for messages and logs; `is_postgres_url` is the
one test of which backend an address selects.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bot.store.rows import POSTGRES_SCHEMES


def redact_url(url: str) -> str:
    """`url` without its password, for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL we can take apart: show none of it after the scheme
        return url.split("://", 1)[0] + "://..."
    if password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[-1]}"))


def is_postgres_url(where: Path | str) -> bool:
    return isinstance(where, str) and where.startswith(POSTGRES_SCHEMES)
