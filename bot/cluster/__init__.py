"""The cluster wing: several instances on one shared store agree on who receives, who runs
what, who fires a cron slot once, and how `/stop` reaches a run on another instance."""
