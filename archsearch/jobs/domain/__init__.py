"""The job domain: jobs and their states, accounts, datasets, scheduling rules, the repository (all SQL), domain errors. Torch-free: the API process imports it."""
