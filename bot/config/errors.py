"""The one exception every config problem becomes, and the exit code the CLI gives it.

`ConfigError`'s message is phrased for the person who edits config.yaml (file, key path,
problem, what to do); `EXIT_CONFIG` (78, EX_CONFIG) is what systemd is told not to restart on.
"""

EXIT_CONFIG = 78


class ConfigError(Exception):
    """A configuration problem, phrased for the person who edits config.yaml."""
