"""Where the benchmarks read MNIST and Fashion-MNIST.

Their quoted numbers are for the full sets (60,000 training and 10,000 test images each), so
a benchmark prefers a data directory that holds them: `ARCHSEARCH_DATA_DIR` when set, else
`shared/datasets` beside the checkout (or beside a folder above it) when it is there. With
neither, it still runs, on the small subsets that ship in `tests/data` (4,000 + 1,000 images
each), and says so on stderr: those numbers are not comparable with the full sets' ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED_SUBSETS = REPO / "tests" / "data"


def bench_data_dir() -> Path:
    """The folder holding `mnist/` and `fashion-mnist/` that a benchmark reads."""
    given = os.environ.get("ARCHSEARCH_DATA_DIR")
    if given:
        return Path(given)
    for parent in REPO.parents:
        if (parent / "shared" / "datasets" / "mnist").is_dir():
            return parent / "shared" / "datasets"
    print(
        f"bench: no full MNIST / Fashion-MNIST found (set ARCHSEARCH_DATA_DIR to a folder "
        f"holding mnist/ and fashion-mnist/); using the small subsets in {SHIPPED_SUBSETS}, "
        "whose numbers are not the full sets' numbers",
        file=sys.stderr,
    )
    return SHIPPED_SUBSETS
