"""The process wing: what the daemon does to its own process (logging, hardening)."""
