"""Seeing inside a running Perch: Prometheus metrics, OpenTelemetry traces, the slow turns.

`telemetry.py` is what the core asks for (`Telemetry`, and `OFF` when both are off);
`live.py` implements it, handing each turn, agent run, model call, tool call and send a
watch (`watches.py`, with span content from `spans.py`) that reports to `metrics.py` (the
series, labels bounded by `labels.py`) and `tracing.py` (the tracer and its OTLP exporter);
`server.py` serves `GET /metrics`.
"""
