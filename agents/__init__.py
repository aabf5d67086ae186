"""Perch agents package."""
