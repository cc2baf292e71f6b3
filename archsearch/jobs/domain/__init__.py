"""The job domain: jobs and their states, accounts, datasets, scheduling rules, the
repository (all SQL) and the domain errors. Torch-free: the API process imports it."""
