"""Tests of several instances on one PostgreSQL store."""
