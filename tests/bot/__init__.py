"""Tests of the daemon's core: gateway, sessions, commands, delivery, budget, logs, the process."""
