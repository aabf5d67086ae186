"""Perch channels package."""
