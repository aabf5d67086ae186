"""`perch doctor` lines about metrics and tracing: where scrapes go, and whether the trace
collector answers.

With `tracing.enabled`, an empty OTLP `ExportTraceServiceRequest` (zero bytes of protobuf:
no spans) is posted to the endpoint the daemon would use, with its headers; a 2xx answer
passes, anything else fails with what came back. With `metrics.enabled`, one line says where
Prometheus should scrape (nothing is probed: the daemon, not doctor, listens there).
"""

from __future__ import annotations

import os

import aiohttp

from bot.config.observe import TracingConfig, traces_endpoint
from bot.config.schema import Config
from bot.operator.checks import Check

TIMEOUT_S = 10.0


def _headers(settings: TracingConfig) -> dict[str, str]:
    """The exporter's headers: `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`, then `tracing.headers`."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    headers: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            headers[key.strip()] = value.strip()
    headers.update(settings.headers)
    headers["Content-Type"] = "application/x-protobuf"
    return headers


async def collector_check(settings: TracingConfig) -> Check:
    """Does the collector take an (empty) export?"""
    endpoint = traces_endpoint(settings)
    fix = "start the collector, or fix tracing.endpoint / OTEL_EXPORTER_OTLP_ENDPOINT"
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.post(endpoint, data=b"", headers=_headers(settings)) as response,
        ):
            status = response.status
            reason = response.reason or ""
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Check(False, "tracing", f"{endpoint}: {exc or type(exc).__name__}", fix)
    if 200 <= status < 300:
        return Check(True, "tracing", f"the collector at {endpoint} takes spans")
    if status in (401, 403):
        fix = "check tracing.headers (the backend's API key)"
    return Check(False, "tracing", f"{endpoint} answered {status} {reason}".rstrip(), fix)


async def observe_checks(config: Config) -> list[Check]:
    checks: list[Check] = []
    if config.metrics.enabled:
        where = f"http://{config.metrics.listen}/metrics"
        guarded = " (bearer token required)" if config.metrics.token else ""
        checks.append(Check(True, "metrics", f"served at {where}{guarded} while Perch runs"))
    if config.tracing.enabled:
        checks.append(await collector_check(config.tracing))
    return checks
