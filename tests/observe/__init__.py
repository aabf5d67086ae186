"""Tests of metrics and traces."""
