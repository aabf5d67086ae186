"""Tests of MCP servers: configuration, connections, containment, results."""
