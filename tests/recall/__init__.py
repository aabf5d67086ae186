"""Tests of recall: the search index, who sees what, and the block before a turn."""
