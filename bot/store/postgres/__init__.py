"""The PostgreSQL backend: a server several Perch instances share (`store.PostgresStore`)."""
