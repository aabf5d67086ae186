"""Tests of heartbeats and cron jobs."""
