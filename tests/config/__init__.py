"""Tests of config.yaml: reading, validation, secrets, layout."""
