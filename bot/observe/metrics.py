"""The daemon's Prometheus series, on a `CollectorRegistry` of its own (never the global one,
so several daemons in one process keep apart), with the process collector beside them.

Every label is bounded by the config: `channel` is a configured channel key (or `none` for
turns without a chat), `provider` a configured provider, `model` one the config names (the
agent's model, fallbacks, each provider's `models`, the sub-agents' model; anything else a
session was switched to is counted as `other`), `tool` a tool on the belt (`unknown` when the
model made one up), and outcomes come from fixed lists. No user, chat or session id is ever
a label. Counters the config already names start at 0, so `rate()` works from the first scrape.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from agents.model import Usage
from bot.observe.labels import (
    CRON_OUTCOMES,
    NO_CHANNEL,
    OTHER_MODEL,
    SEND_OUTCOMES,
    TOKEN_KINDS,
    TURN_OUTCOMES,
    UNKNOWN_TOOL,
)

# Turns of an assistant take from under a second (a command-like answer) to minutes (tools).
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)

disable_created_metrics()  # `*_created` series are noise for dashboards; this process only


class PerchMetrics:
    """The series of one daemon. `known_models` are the (provider, model) pairs the config
    names; `channels` the configured channel keys."""

    def __init__(
        self, known_models: Collection[tuple[str, str]], channels: Iterable[str] = ()
    ) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self.known_models = frozenset(known_models)
        self.turns = Counter(
            "perch_turns",
            "Turns run, by the channel they answer on and how they ended.",
            ["channel", "outcome"],
            registry=registry,
        )
        self.turn_seconds = Histogram(
            "perch_turn_duration_seconds",
            "Time from a turn's start to its delivered (or silent) reply.",
            ["channel"],
            buckets=TURN_BUCKETS,
            registry=registry,
        )
        self.model_calls = Counter(
            "perch_model_calls",
            "Model calls (each model a fallback chain tries is one), by how they ended.",
            ["provider", "model", "outcome"],
            registry=registry,
        )
        self.model_tokens = Counter(
            "perch_model_tokens",
            "Tokens of answered model calls: input, output, cache_read, cache_write.",
            ["provider", "model", "kind"],
            registry=registry,
        )
        self.model_cost = Counter(
            "perch_model_cost_usd",
            "What answered model calls cost, in US dollars (the configured or built-in prices).",
            ["provider", "model"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "perch_tool_calls",
            "Tool calls the model made, by tool and outcome (ok, error, cancelled).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.sends = Counter(
            "perch_channel_sends",
            "Messages handed to a platform (replies, notices, cron results), by outcome.",
            ["channel", "outcome"],
            registry=registry,
        )
        self.channel_up = Gauge(
            "perch_channel_up",
            "1 while the channel is connected and receives on this instance, else 0.",
            ["channel"],
            registry=registry,
        )
        self.inbox_pending = Gauge(
            "perch_inbox_pending",
            "Accepted messages not finished yet (running, queued or awaiting recovery).",
            registry=registry,
        )
        self.runs_active = Gauge(
            "perch_runs_active", "Turns running on this instance now.", registry=registry
        )
        self.cron_runs = Counter(
            "perch_cron_runs",
            "Cron job runs, by outcome (ok, delivered, error, skipped, missed).",
            ["outcome"],
            registry=registry,
        )
        self.budget_today = Gauge(
            "perch_budget_spent_usd_today",
            "Spend since midnight UTC in US dollars (all instances on this store).",
            registry=registry,
        )
        self._start_at_zero(channels)

    def _start_at_zero(self, channels: Iterable[str]) -> None:
        for channel in [*channels, NO_CHANNEL]:
            self.turn_seconds.labels(channel)
            for outcome in TURN_OUTCOMES:
                self.turns.labels(channel, outcome)
            for outcome in SEND_OUTCOMES:
                self.sends.labels(channel, outcome)
        for provider, model in self.known_models:
            self.model_calls.labels(provider, model, "ok")
            self.model_cost.labels(provider, model)
            for kind in TOKEN_KINDS:
                self.model_tokens.labels(provider, model, kind)
        for outcome in CRON_OUTCOMES:
            self.cron_runs.labels(outcome)

    # -- recording -------------------------------------------------------------------------

    def model_label(self, provider: str, model: str) -> str:
        return model if (provider, model) in self.known_models else OTHER_MODEL

    def turn(self, channel: str, outcome: str, seconds: float) -> None:
        self.turns.labels(channel, outcome).inc()
        self.turn_seconds.labels(channel).observe(seconds)

    def model_call(self, provider: str, model: str, outcome: str, usage: Usage | None) -> None:
        label = self.model_label(provider, model)
        self.model_calls.labels(provider, label, outcome).inc()
        if usage is None:
            return
        tokens = self.model_tokens
        tokens.labels(provider, label, "input").inc(usage.input_tokens)
        tokens.labels(provider, label, "output").inc(usage.output_tokens)
        tokens.labels(provider, label, "cache_read").inc(usage.cache_read_tokens)
        tokens.labels(provider, label, "cache_write").inc(usage.cache_write_tokens)
        self.model_cost.labels(provider, label).inc(max(usage.cost_usd, 0.0))

    def tool_call(self, tool: str, known: bool, outcome: str) -> None:
        self.tool_calls.labels(tool if known else UNKNOWN_TOOL, outcome).inc()

    def send(self, channel: str, outcome: str) -> None:
        self.sends.labels(channel, outcome).inc()

    def cron_run(self, outcome: str) -> None:
        self.cron_runs.labels(outcome if outcome in CRON_OUTCOMES else "error").inc()

    # -- reading ---------------------------------------------------------------------------

    def series(self) -> dict[str, float]:
        """Every `perch_*` series as `name{label="value",...}` -> value, for `perch status
        --json` (histograms as their `_count` and `_sum`)."""
        out: dict[str, float] = {}
        for metric in (
            self.turns,
            self.turn_seconds,
            self.model_calls,
            self.model_tokens,
            self.model_cost,
            self.tool_calls,
            self.sends,
            self.channel_up,
            self.inbox_pending,
            self.runs_active,
            self.cron_runs,
            self.budget_today,
        ):
            for family in metric.collect():
                for sample in family.samples:
                    if sample.name.endswith(("_bucket", "_created")):
                        continue
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out
