"""The job domain shared by the API and the worker, in three rooms: `domain` (torch-free
rules and all SQL), `runtime` (what executes a job; imports torch) and `platform` (settings,
database, stores, broker)."""
