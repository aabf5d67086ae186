"""Perch agents.tools package."""
