"""The platform: settings, database sessions, artifact stores, broker configuration and
migrations. It knows nothing of jobs."""
