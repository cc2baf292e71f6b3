"""Uploaded datasets: receiving an upload, reading its format safely, validating
it, storing it once per content hash with its statistics, and serving it to jobs.

Torch-free: the API process runs all of it. The worker turns the stored arrays into tensors
with `core.data.uploaded`. Import submodules directly; this package imports nothing.
"""
