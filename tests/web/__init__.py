"""Tests of the dashboard, in a real browser and over HTTP."""
