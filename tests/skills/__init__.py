"""Tests of Agent Skills: the format, the catalog, the prompt block, read_skill, scripts in the sandbox."""
