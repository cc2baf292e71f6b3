"""Studies: many jobs that compare methods at equal budget, sweep their knobs
and report the Pareto front of accuracy against size."""
