"""The run time: what executes a job (executor, run context, lease keeper, runner, reaper,
device choice, data loading for runs). Everything here may import torch; the API process
never imports it (an import-linter contract)."""
