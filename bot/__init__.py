"""Perch bot package."""
