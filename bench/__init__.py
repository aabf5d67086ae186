"""Perch's benchmarks: what Perch itself costs per turn, beside the model's latency.

Each module is one benchmark, runnable as `python -m bench.<name>`; `python -m bench.run_all`
(`make bench`) runs them all, each in a fresh process, and prints the results table. Only
127.0.0.1 traffic: the Bot API and the model are the fakes of `tests/fakes/`.
"""
