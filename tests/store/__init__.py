"""Tests of the store's roles against SQLite and PostgreSQL."""
