"""Device usage: the seconds each attempt of a job held a device, by device kind."""
