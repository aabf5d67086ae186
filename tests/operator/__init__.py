"""Tests of the perch command: control socket, doctor, onboarding, the service install."""
