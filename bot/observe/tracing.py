"""The daemon's OpenTelemetry tracer: a `TracerProvider` of its own, exporting over OTLP/HTTP.

Spans are batched (`BatchSpanProcessor`: a bounded queue, one background thread), so a
collector that is slow or down costs a turn nothing; spans it cannot take are dropped. The
exporter's own per-batch error lines are kept out of the log: `_ReportingExporter` says once,
at WARNING, that the collector does not take spans (with the reason), and once, at INFO, that
it does again. The provider is never the process-global one, and never shut down by `atexit`
(which could hold the exit for the export timeout): `aclose()` flushes within a bound and
stops it. `traceparent()` gives the W3C header of the span current in this context (for MCP
servers over HTTP). Standard variables apply: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_EXPORTER_OTLP_*` (endpoint, headers, timeout, compression, certificates), `OTEL_BSP_*`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from bot.config.observe import TracingConfig, traces_endpoint

log = logging.getLogger(__name__)

# Longest attribute value kept (message text with `tracing.content: true`): cut beyond.
MAX_ATTRIBUTE_CHARS = 16_384
CLOSE_TIMEOUT_S = 3.0
# The SDK's loggers that would say something for every failed batch or dropped span.
_NOISY = ("opentelemetry.exporter.otlp", "opentelemetry.sdk._shared_internal")


def perch_version() -> str:
    try:
        return version("perch")
    except PackageNotFoundError:
        return "unknown"


class _LastWords(logging.Handler):
    """Keeps what the exporter wanted to log during one export: the reason in our warning."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = " ".join(record.getMessage().split())
        if line not in self.lines and len(self.lines) < 4:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "; ".join(self.lines)[:300]


_last_words = _LastWords()
for _name in _NOISY:
    _logger = logging.getLogger(_name)
    _logger.propagate = False
    _logger.addHandler(_last_words)
# "Queue full, dropping span" would make a log record per span while the collector is down.
logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.ERROR)


class _ReportingExporter(SpanExporter):
    """The OTLP exporter, counting what it sent and dropped, speaking once per outage."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner = inner
        self.where = where
        self.exported = 0
        self.dropped = 0
        self.down = False
        self.answered = False  # the collector took a batch at least once
        self.reason = ""
        self._closed = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        _last_words.lines = []  # one batch thread per provider; a race only mixes reasons
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter bug must not kill the batch thread
            _last_words.lines.append(f"{type(exc).__name__}: {exc}")
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            self.answered = True
            if self.down:
                self.down = False
                log.info("tracing: the collector at %s takes spans again", self.where)
            return result
        self.dropped += len(spans)
        if not self.down and not self._closed.is_set():
            self.down = True
            self.reason = _last_words.text or "no answer"
            log.warning(
                "tracing: the collector at %s does not take spans (%s); they are dropped "
                "until it does, and turns go on unaffected (said once; `perch doctor` checks it)",
                self.where,
                self.reason,
            )
        return result

    def shutdown(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.inner.shutdown()  # also ends the wait of a retry in progress

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class Tracing:
    """One daemon's tracer provider, exporter and propagator."""

    def __init__(self, settings: TracingConfig, *, instance: str = "") -> None:
        self.settings = settings
        self.endpoint = traces_endpoint(settings)
        attributes: dict[str, Any] = {"service.name": "perch", "service.version": perch_version()}
        if instance:
            attributes["service.instance.id"] = instance
        self.provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
            resource=Resource.create(attributes),  # OTEL_SERVICE_NAME and friends win
            shutdown_on_exit=False,
            span_limits=SpanLimits(max_attribute_length=MAX_ATTRIBUTE_CHARS),
        )
        otlp = OTLPSpanExporter(endpoint=self.endpoint, headers=dict(settings.headers) or None)
        self.exporter = _ReportingExporter(otlp, self.endpoint)
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.tracer: Tracer = self.provider.get_tracer("perch", perch_version())
        self._propagator = TraceContextTextMapPropagator()
        self._closed = False

    def traceparent(self) -> dict[str, str]:
        """`traceparent` (and `tracestate`) of the current span; {} outside any."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier

    def flush(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Export what is queued now (blocking; for tests and `aclose`)."""
        return self.provider.force_flush(int(timeout_s * 1000))

    async def aclose(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Export what is left within `timeout_s` (nothing is tried while the collector is
        known to be down), then stop the provider and its thread."""
        if self._closed:
            return
        self._closed = True
        if not self.exporter.down:
            try:
                await asyncio.wait_for(asyncio.to_thread(self.flush, timeout_s), timeout_s)
            except TimeoutError:
                log.warning(
                    "tracing: the last spans were not exported within %g s; dropped", timeout_s
                )
        self.exporter.shutdown()  # a batch still retrying gives up now
        try:
            await asyncio.wait_for(asyncio.to_thread(self.provider.shutdown), timeout_s)
        except TimeoutError:  # an export stuck on an unanswered request: its thread ends with us
            log.warning("tracing: the exporter did not stop within %g s; left behind", timeout_s)

    def status(self) -> dict[str, Any]:
        exporter = self.exporter
        collector = "not answering" if exporter.down else "answering" if exporter.answered else ""
        return {
            "enabled": True,
            "endpoint": self.endpoint,
            "sample_ratio": self.settings.sample_ratio,
            "content": self.settings.content,
            "collector": collector or "no spans sent yet",
            "spans_exported": exporter.exported,
            "spans_dropped": exporter.dropped,
            **({"error": exporter.reason} if exporter.down else {}),
        }
