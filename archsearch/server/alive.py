"""The worker pods' liveness probe, light: `python -m archsearch.server.alive --max-age 180`
exits 0 when a worker process of this machine touched its alive file
(`Settings.resolved_worker_alive_file`, touched at each heartbeat) within `--max-age`
seconds, 1 otherwise.

Kubernetes runs it every minute in every worker pod, so it imports the settings alone: no
CLI (click, rich, the server's commands), no torch, no database driver. `archsearch worker
alive` answers the same through this module, at the CLI's import cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from archsearch.jobs.platform.settings import Settings

DEFAULT_MAX_AGE = 180.0


def seconds_since_touched(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


def verdict(path: Path, max_age: float) -> tuple[bool, str]:
    """(alive, the line the probe prints) for the alive file at `path`."""
    age = seconds_since_touched(path)
    if age is None:
        return False, f"no worker heartbeat yet: {path} does not exist"
    if age > max_age:
        limit = f"limit {max_age:.0f}s, {path}"
        return False, f"worker stalled: its last heartbeat was {age:.0f}s ago ({limit})"
    return True, f"worker alive: last heartbeat {age:.0f}s ago"


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"--max-age must be >= 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m archsearch.server.alive")
    parser.add_argument(
        "--max-age",
        type=non_negative,
        default=DEFAULT_MAX_AGE,
        help="seconds since the last heartbeat beyond which the worker counts as stalled",
    )
    args = parser.parse_args(argv)
    alive, line = verdict(Settings().resolved_worker_alive_file, args.max_age)
    print(line)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
