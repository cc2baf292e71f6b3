"""The run time: what executes a job (executor, run context, lease keeper, runner, reaper, device choice, data loading). Everything here may import torch; the API process never imports it."""
