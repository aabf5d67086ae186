"""Tests of the platforms: Telegram, Slack, Signal, Discord, the console; chunking and rendering."""
