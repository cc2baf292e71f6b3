"""The job domain: a job row, its life, its queue and its workers."""
