"""Tests of the built-in tools and their guards: files, exec and its sandbox, web, memory, messages."""
