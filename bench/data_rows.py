"""The job's data path on one epoch of MNIST batches (469 shuffled batches of 128 rows):
CPU per epoch of each way to gather and normalise the rows, arms interleaved in one run.

The worker keeps MNIST as raw uint8 pixels in the machine's dataset cache file, mapped
copy-on-write (`jobs/runtime/data.py`), and `Inputs` normalises each batch it takes
(`core/data/inputs.py`): the same float32 operations, in the same order, as normalising the
whole array, so a batch is bit-identical to it.

Normalisation arms (rows from the mapping):
- convert, then divide (main): `Inputs` with main's normalisation (index_select, then
  convert to float32, divide, subtract, divide).
- as built: `Inputs` now (`torch.true_divide(uint8 rows, float32 scale)` converts and
  divides in one pass; the per-dimension views of mean and std kept; bit-identical).
- x * a + b: one multiply-add with folded constants (not bit-identical: it rounds differently).
- gather alone: index_select of the uint8 rows, no normalisation.

Reading arms (raw rows only, what memory the process maps):
- mapped: index_select on the mapped file, as built (every page touched stays resident in
  the process, counted in its RSS; they are page cache, shared by every process mapping it).
- pread per row: `os.preadv` of each row into a buffer; the mapping is never touched.
- mapped, dropped per batch: `madvise(MADV_DONTNEED)` on the mapping after each batch.

Run: PYTHONPATH=$PWD ARCHSEARCH_DATA_DIR=/work/shared/datasets python bench/data_rows.py
     [--rounds 9]
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from _data_dir import bench_data_dir

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = bench_data_dir()
BATCH = 128
Arm = Callable[[torch.Tensor], torch.Tensor]


def normalisation_arms(inputs: object) -> dict[str, Arm]:
    from archsearch.core.data.inputs import Inputs

    assert isinstance(inputs, Inputs)

    class MainInputs(Inputs):
        def _normalise(self, rows: torch.Tensor) -> torch.Tensor:  # main's, verbatim
            if self.identity:
                return rows
            # The channel axis of `rows`: 1 for a batch, 0 for a single sample.
            view = [1] * rows.dim()
            view[rows.dim() - self.stored.dim() + 1] = -1
            values = rows.to(torch.float32, copy=True)
            values.div_(self.scale)
            return values.sub_(self._mean.view(view)).div_(self._std.view(view))

    main_inputs = MainInputs(inputs.stored, **inputs.stats)
    stored, view = inputs.stored, [1, -1, 1, 1]
    mean, std = inputs._mean.view(view), inputs._std.view(view)
    scale = torch.tensor(inputs.scale, dtype=torch.float32)
    a = (1 / (scale * std)).view(view)
    b = (-mean / std).view(view)
    return {
        "convert, then divide (main)": lambda i: main_inputs[i],
        "as built": lambda i: inputs[i],
        "x * a + b (inexact)": lambda i: (
            stored.index_select(0, i).to(torch.float32).mul_(a).add_(b)
        ),
        "gather alone": lambda i: stored.index_select(0, i),
    }


def reading_arms(path: Path) -> dict[str, Arm]:
    header = np.load(path, mmap_mode="c")
    shape, offset, row = header.shape, header.offset, header[0].nbytes
    mapped = torch.from_numpy(header)
    fd = os.open(path, os.O_RDONLY)
    buffer = bytearray(BATCH * row)
    views = [memoryview(buffer)[k * row : (k + 1) * row] for k in range(BATCH)]

    def pread_rows(index: torch.Tensor) -> torch.Tensor:
        for k, r in enumerate(index.tolist()):
            os.preadv(fd, [views[k]], offset + r * row)
        rows = torch.frombuffer(buffer, dtype=torch.uint8)[: len(index) * row]
        return rows.view(len(index), *shape[1:]).clone()

    with open(path, "rb") as handle:  # a mapping of its own, dropped after each batch
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        dropped = mmap.mmap(handle.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=prot)
    count = int(np.prod(shape))
    pixels = np.frombuffer(dropped, dtype=np.uint8, count=count, offset=offset).reshape(shape)
    second = torch.from_numpy(pixels)

    def mapped_dropped(index: torch.Tensor) -> torch.Tensor:
        out = second.index_select(0, index)
        dropped.madvise(mmap.MADV_DONTNEED)
        return out

    return {
        "mapped": lambda i: mapped.index_select(0, i),
        "pread per row": pread_rows,
        "mapped, dropped per batch": mapped_dropped,
    }


def cpu_per_epoch(arms: dict[str, Arm], batches: list[torch.Tensor], rounds: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            started = time.process_time()
            for index in batches:
                arms[name](index)
            times[name].append(time.process_time() - started)
    base = median(times[names[0]])
    for name, spent in times.items():
        print(
            f"  {name:28s} {median(spent) * 1000:6.1f} ms CPU/epoch  {median(spent) / base:5.2f}x"
            f"  (range {min(spent) * 1000:.1f}-{max(spent) * 1000:.1f})"
        )


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from archsearch.core.data.catalog import dataset_info
    from archsearch.core.data.loaders import load_full
    from archsearch.jobs.runtime.data import DatasetCache

    torch.set_num_threads(1)  # as a worker trains
    with tempfile.TemporaryDirectory(prefix="archsearch-data-rows-") as home:
        cache = DatasetCache(Path(home))
        data = cache.get("mnist", dataset_info("mnist"), lambda: load_full("mnist", (DATA_DIR,)))
        generator = torch.Generator().manual_seed(0)
        batches = list(torch.randperm(len(data.x_train), generator=generator).split(BATCH))
        arms = normalisation_arms(data.x_train)
        reference = arms["convert, then divide (main)"]
        for name in ("as built", "x * a + b (inexact)"):
            same = all(torch.equal(arms[name](i), reference(i)) for i in batches)
            print(f"{name}: bit-identical to main's on the whole epoch: {same}")
        print(f"normalisation (load {os.getloadavg()[0]:.1f}):")
        cpu_per_epoch(arms, batches, args.rounds)
        print(f"reading the raw rows (load {os.getloadavg()[0]:.1f}):")
        reading = reading_arms(Path(home) / "mnist" / "x_train.npy")
        assert all(
            torch.equal(arm(i), reading["mapped"](i))
            for arm in reading.values()
            for i in batches[:20]
        )
        cpu_per_epoch(reading, batches, args.rounds)


if __name__ == "__main__":
    main()
