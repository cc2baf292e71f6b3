"""RigL (Evci et al., 2020) against the two-temperature learned mask at equal density and
steps (`python bench/prune.py --only 5`): the same MLP, data, epochs and seeds; a static
random sparse network (RigL with no update) shows what the rewiring adds."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.methods import prune
from archsearch.specs import DatasetRef, parse_job_spec

ARMS: dict[str, dict[str, Any]] = {
    "learned (two temperatures)": {},
    "rigl": {"algorithm": "rigl"},
    "static random (rigl, no update)": {
        "algorithm": "rigl",
        "rigl": {"update_interval": 1_000_000},
    },
}


def rigl_benchmark(data_dirs: tuple[Path, ...], quick: bool) -> None:
    train, seeds, densities = (1000, [0], (0.1,)) if quick else (4000, [0, 1, 2], (0.1, 0.05))
    ref = {"name": "mnist", "train_subset": train}
    print(
        f"\n== 5. RigL vs the learned mask: MNIST {train} training images, the default MLP "
        f"(256, 128) and 10 epochs, seeds {seeds}; test accuracy mean +- sd =="
    )
    for density in densities:
        for label, fields in ARMS.items():
            accs = []
            for seed in seeds:
                job = {"method": "prune", "dataset": ref, "density": density, **fields}
                spec = parse_job_spec({**job, "training": {"seed": seed}})
                data = load_dataset(DatasetRef(**ref), data_dirs, seed=seed)
                metrics = prune.run(spec, data, InMemoryContext()).metrics  # type: ignore[arg-type]
                accs.append(metrics["test_accuracy"])
            sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
            print(
                f"density {density:<5} {label:34s} {statistics.fmean(accs):.4f} +- {sd:.4f}",
                flush=True,
            )
