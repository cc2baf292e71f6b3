"""Each job's log lines: what its method logs and warns, the worker's own messages about
it, and the traceback of a crash, kept per job in the database and bounded in size."""
