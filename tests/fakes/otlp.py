"""A fake OpenTelemetry collector on 127.0.0.1: OTLP/HTTP traces, as the real exporter sends them.

`POST /v1/traces` takes an `ExportTraceServiceRequest` in protobuf (gzip or deflate when the
`Content-Encoding` says so), decodes it with `opentelemetry-proto`, and keeps every span as
a `ReceivedSpan` (ids in hex, attributes as plain Python values). `answer_status` makes it
refuse batches (a 503 collector); `requests` counts the POSTs and `headers` keeps the last
ones. `wait_for(condition)` returns once the spans satisfy it.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: int  # 1 internal, 2 server, 3 client
    attributes: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    start_ns: int
    end_ns: int
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def _decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status=span.status.code,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        resource=resource,
                    )
                )
    return spans


class FakeCollector:
    """`async with FakeCollector() as collector:`; point the exporter at `collector.url`."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.headers: dict[str, str] = {}
        self.answer_status = 200
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL (`tracing.endpoint`); the exporter adds /v1/traces."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeCollector:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.headers = dict(request.headers)
        body = await request.read()
        encoding = request.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.answer_status != 200:
            return web.Response(status=self.answer_status, text="collector unavailable")
        spans = _decode(body)
        async with self._changed:
            self.spans.extend(spans)
            self._changed.notify_all()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def wait_for(
        self, condition: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        async def satisfied() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: condition(self.spans))

        await asyncio.wait_for(satisfied(), timeout)
        return list(self.spans)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.trace_id == trace_id]
