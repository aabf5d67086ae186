"""Store addresses: telling a PostgreSQL URL from a file path, and showing one safely.

`redact_url` drops the password from a URL (or a keyword DSN) for messages and logs; `is_postgres_url` is the
one test of which backend an address selects.
"""

from __future__ import annotations

from pathlib import Path

from bot.config.redact import mask_credentials
from bot.store.rows import POSTGRES_SCHEMES


def redact_url(url: str) -> str:
    """`url` without its password however it is written (the one redactor's rule,
    `bot.config.redact.mask_credentials`), for messages and logs."""
    return mask_credentials(url)


def is_postgres_url(where: Path | str) -> bool:
    return isinstance(where, str) and where.startswith(POSTGRES_SCHEMES)
