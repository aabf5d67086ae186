"""The SQLite backend: one file, one daemon, the embedded default (`store.SQLiteStore`)."""
