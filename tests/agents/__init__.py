"""Tests of the platform-free brain: loop, prompt and cache, history, compaction, sanitizer, guard, sub-agents."""
