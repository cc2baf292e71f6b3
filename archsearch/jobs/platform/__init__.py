"""The platform: settings, database sessions, artifact stores, broker configuration and migrations. Knows nothing of jobs."""
