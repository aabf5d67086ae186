"""Several agents in one daemon: which agent answers where, and what each may see."""
