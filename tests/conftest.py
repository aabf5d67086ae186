"""Test-wide environment: no proxies (slack_sdk ignores NO_PROXY), loopback only; no
`OTEL_*` setting of the shell reaches the tracing tests; hypothesis without a per-example
deadline (speed is measured in `bench/`, never asserted as a wall-clock time in a test)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("perch", deadline=None)
settings.load_profile("perch")

for _var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_var, None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"
os.environ["PTB_TIMEDELTA"] = "1"
for _var in [name for name in os.environ if name.startswith("OTEL_")]:
    os.environ.pop(_var)

# The store backends (SQLite, and a throwaway PostgreSQL server for the session).
from tests.mail_servers import dovecot, dovecot_server, smtp_sink  # noqa: E402, F401
from tests.store_backends import backend, pg_url, postgres_server  # noqa: E402, F401
