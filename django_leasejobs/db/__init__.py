"""Database helpers above the models: the database clock, sessions, deadlock retries,
the client encoding, migration state and the signals sent at commit."""
