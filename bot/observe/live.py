"""`LiveTelemetry`: the `Telemetry` of a daemon with metrics or tracing (or both) on.

It is the agent loop's `RunObserver` and hands each piece of work a watch
(`bot.observe.watches`) that reports to what is on: the daemon's `PerchMetrics` and its
`Tracing`. It also keeps the last `RECENT_TURNS` turns, so `perch status --json` can name
the slowest of them with their trace ids (`slow_turns`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import get_current_span as current_span

from agents.model import ModelRequest
from agents.observer import RunObserver
from bot.config.models import offered_models, split_model
from bot.config.schema import Config
from bot.observe.spans import CONVERSATION
from bot.observe.watches import (
    ModelCallWatch,
    RunWatch,
    SendWatch,
    Sinks,
    ToolCallWatch,
    TurnRecord,
    TurnWatch,
)

if TYPE_CHECKING:
    from bot.observe.metrics import PerchMetrics
    from bot.observe.tracing import Tracing

RECENT_TURNS = 200  # turns remembered for the slow-turn list
SLOW_TURNS = 5  # how many of them `perch status --json` shows, slowest first


def known_models(config: Config) -> set[tuple[str, str]]:
    """(provider, model) of every model the config names: the only `model` label values."""
    names = [*offered_models(config)]
    if config.agent.subagents.model:
        names.append(config.agent.subagents.model)
    return {split_model(config, name) for name in names}


class LiveTelemetry:
    def __init__(
        self,
        sinks: Sinks,
        metrics: PerchMetrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._sinks = sinks
        self.metrics = metrics
        self.tracing = tracing
        self._recent: deque[TurnRecord] = deque(maxlen=RECENT_TURNS)

    @classmethod
    def from_config(cls, config: Config, instance: str = "") -> LiveTelemetry:
        metrics: PerchMetrics | None = None
        tracing: Tracing | None = None
        if config.metrics.enabled:
            from bot.observe.metrics import PerchMetrics

            metrics = PerchMetrics(known_models(config), config.channels.enabled())
        if config.tracing.enabled:
            from bot.observe.tracing import Tracing

            tracing = Tracing(config.tracing, instance=instance)
        sinks = Sinks(
            metrics=metrics,
            tracer=tracing.tracer if tracing is not None else None,
            content=config.tracing.content,
            kinds={name: settings.kind for name, settings in config.providers.items()},
            agent=config.agent.id,
            models=frozenset(known_models(config)),
        )
        return cls(sinks, metrics, tracing)

    # -- agents.observer.RunObserver -------------------------------------------------------

    @property
    def observer(self) -> RunObserver:
        return self

    def agent_run(self, session_key: str, depth: int) -> RunWatch:
        return RunWatch(self._sinks, depth)

    def model_call(self, provider: str, model: str, request: ModelRequest) -> ModelCallWatch:
        return ModelCallWatch(self._sinks, provider, model, request)

    def tool_call(
        self, call_id: str, name: str, arguments: dict[str, Any], known: bool
    ) -> ToolCallWatch:
        return ToolCallWatch(self._sinks, call_id, name, arguments, known)

    # -- the daemon's own ------------------------------------------------------------------

    def turn(self, channel: str, session_kind: str, run_id: str) -> TurnWatch:
        return TurnWatch(self._sinks, channel, session_kind, run_id, self._recent.append)

    def send(self, channel: str) -> SendWatch:
        return SendWatch(self._sinks, channel)

    def conversation(self, session_id: str) -> None:
        if self.tracing is not None:
            current_span().set_attribute(CONVERSATION, session_id)

    def cron_run(self, status: str) -> None:
        if self.metrics is not None:
            self.metrics.cron_run(status)

    def mcp_headers(self) -> dict[str, str]:
        return self.tracing.traceparent() if self.tracing is not None else {}

    def slow_turns(self) -> list[dict[str, Any]]:
        slowest = sorted(self._recent, key=lambda t: t.seconds, reverse=True)[:SLOW_TURNS]
        return [{**asdict(t), "seconds": round(t.seconds, 3)} for t in slowest]

    def status(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {"enabled": self.metrics is not None}
        if self.metrics is not None:
            metrics["series"] = self.metrics.series()
        tracing = self.tracing.status() if self.tracing is not None else {"enabled": False}
        return {"metrics": metrics, "tracing": tracing, "slow_turns": self.slow_turns()}

    async def aclose(self) -> None:
        if self.tracing is not None:
            await self.tracing.aclose()
