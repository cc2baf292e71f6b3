"""The job domain: jobs and their states (`tables`, `states`, `service`), accounts,
datasets, the scheduling rules (`scheduler`), the SQL in repository modules (`repository`,
`queue_repository`, `worker_repository`, `accounts/repository`, `datasets/repository`), and
every domain error (`errors`). Tables share `base`; `metadata` gathers them for Alembic.
Torch-free: the API process imports it."""
