"""The `metrics:` and `tracing:` config sections: how an operator sees inside a running Perch.

`metrics: {enabled, listen, token}` serves Prometheus metrics at `GET /metrics` on `listen`
(`host:port`, `[v6]:port`; 127.0.0.1:9464 by default). A listen address that is not loopback
needs `token`, which every scrape must send as `Authorization: Bearer <token>`: metrics say
what the assistant does and costs. `tracing: {enabled, endpoint, headers, sample_ratio,
content}` exports one OpenTelemetry trace per turn over OTLP/HTTP; an unset `endpoint`
leaves it to the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
variables (else `http://localhost:4318`), and `headers` add to `OTEL_EXPORTER_OTLP_HEADERS`.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_COLLECTOR = "http://localhost:4318"
TRACES_PATH = "v1/traces"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def split_listen(value: str) -> tuple[str, int]:
    """(host, port) of `host:port` or `[v6]:port`; ValueError with what is wrong."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected host:port such as {DEFAULT_LISTEN}, got {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets, as [::1]:9464, got {value!r}")
    number = int(port)
    if number > 65535:
        raise ValueError(f"port {number} is over 65535 in {value!r}")
    return host, number


def is_loopback(host: str) -> bool:
    """Only this machine can connect (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name resolves to whatever DNS says: treat it as reachable


class MetricsConfig(_Model):
    enabled: bool = False
    listen: str = DEFAULT_LISTEN
    token: str | None = None  # required (as a bearer token) when `listen` is not loopback

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        split_listen(value)
        return value.strip()

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is not None and len(value.strip()) < 16:
            raise ValueError("must be at least 16 characters (or null on a loopback listen)")
        return value.strip() if value is not None else None

    @model_validator(mode="after")
    def _token_off_loopback(self) -> MetricsConfig:
        host, _port = split_listen(self.listen)
        if self.enabled and not is_loopback(host) and not self.token:
            raise ValueError(
                f"listen {self.listen} is reachable from other machines: set metrics.token "
                "(Prometheus sends it as a bearer token) or listen on 127.0.0.1"
            )
        return self


class TracingConfig(_Model):
    enabled: bool = False
    endpoint: str | None = None  # the collector's OTLP/HTTP base URL; /v1/traces is added
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. an API key of the backend
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)  # share of turns traced
    content: bool = False  # message text and tool arguments in spans (off: sizes and names)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http(s):// URL such as {DEFAULT_COLLECTOR}")
        return value.strip()


def traces_endpoint(settings: TracingConfig) -> str:
    """Where spans are sent: `endpoint` (+ /v1/traces unless it ends so), else the
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variable as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT`
    (+ /v1/traces), else the collector on localhost: the SDK's own order."""
    if settings.endpoint:
        base = settings.endpoint
    elif named := os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return named
    else:
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_COLLECTOR
    if base.rstrip("/").endswith("/" + TRACES_PATH):
        return base
    return f"{base.rstrip('/')}/{TRACES_PATH}"


def observe_secrets(metrics: MetricsConfig, tracing: TracingConfig) -> list[str]:
    """Values the log must never show: the scrape token and the collector's header values."""
    return [v for v in [metrics.token or "", *tracing.headers.values()] if v]
