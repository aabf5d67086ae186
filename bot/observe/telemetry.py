"""What the daemon's core asks of its telemetry: the `Telemetry` protocol, and `OFF`.

A turn runs inside `telemetry.turn(...)` (its `TurnProbe` carries the trace id for the log
and takes the outcome), each platform send inside `telemetry.send(channel)`, each cron run
is counted with `cron_run(status)`, and `observer` is what the agent loop and the model
router report to (`agents.observer.RunObserver`). `build_telemetry(config)` returns the live
implementation (`bot.observe.live`) when `metrics.enabled` or `tracing.enabled`, else `OFF`,
which does nothing and imports neither Prometheus nor OpenTelemetry: a daemon without them
pays a method call per hook.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from agents.observer import NO_OBSERVER, RunObserver
from bot.config.schema import Config

if TYPE_CHECKING:
    from bot.observe.metrics import PerchMetrics


class TurnProbe(Protocol):
    trace_id: str  # hex trace id when this turn is traced, else ""

    def finished(self, outcome: str) -> None:
        """How the turn ended (ok, error, cancelled, max_iterations, blocked, skipped)."""


class Telemetry(Protocol):
    @property
    def metrics(self) -> PerchMetrics | None:
        """The series `GET /metrics` serves, when metrics are on."""

    @property
    def observer(self) -> RunObserver: ...

    def turn(
        self, channel: str, session_kind: str, run_id: str
    ) -> AbstractContextManager[TurnProbe]: ...

    def send(self, channel: str) -> AbstractContextManager[object]: ...

    def conversation(self, session_id: str) -> None:
        """The current turn works in the session with this opaque store id (for its trace;
        never the session key, which holds chat ids)."""

    def cron_run(self, status: str) -> None: ...

    def mcp_headers(self) -> dict[str, str]:
        """Headers for a request to an MCP server now (`traceparent`), else {}."""

    def status(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


class _NoProbe:
    __slots__ = ()
    trace_id = ""

    def __enter__(self) -> _NoProbe:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def finished(self, outcome: str) -> None:
        return None


_NO_PROBE = _NoProbe()


class TelemetryOff:
    """Metrics and tracing both off."""

    __slots__ = ()
    metrics = None

    @property
    def observer(self) -> RunObserver:
        return NO_OBSERVER

    def turn(self, channel: str, session_kind: str, run_id: str) -> _NoProbe:
        return _NO_PROBE

    def send(self, channel: str) -> _NoProbe:
        return _NO_PROBE

    def conversation(self, session_id: str) -> None:
        return None

    def cron_run(self, status: str) -> None:
        return None

    def mcp_headers(self) -> dict[str, str]:
        return {}

    def status(self) -> dict[str, Any]:
        return {"metrics": {"enabled": False}, "tracing": {"enabled": False}}

    async def aclose(self) -> None:
        return None


OFF: Telemetry = TelemetryOff()


def build_telemetry(config: Config, instance: str = "") -> Telemetry:
    """The daemon's telemetry for `config` (`instance`: this daemon's id in the store)."""
    if not (config.metrics.enabled or config.tracing.enabled):
        return OFF
    from bot.observe.live import LiveTelemetry

    return LiveTelemetry.from_config(config, instance)
