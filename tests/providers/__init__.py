"""Tests of the model providers on the wire: Anthropic and OpenAI-compatible, retries, transports."""
