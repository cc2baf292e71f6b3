"""What the upload bounds test and `bench/upload.py` share: files at the limits
built in a temporary folder, the API process's peak memory during one upload, and the
latency of `GET /v1/jobs/{id}` sampled while an upload is in flight.

Peak memory is the kernel's high-water mark of the API process (VmHWM), reset right before
the upload by writing 5 to /proc/<pid>/clear_refs, minus its resident size at that moment:
what the upload added at its worst, whatever allocator or library it went through.
"""

from __future__ import annotations

import io
import statistics
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

MIB = 1 << 20
QUICK_JOB = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 64},
    "training": {"epochs": 1},
}


def npz_file(path: Path, mib: int, features: int = 256) -> Path:
    """An .npz of float32 features (x) and labels (y) of about `mib` MiB, no test split."""
    rows = mib * MIB // (features * 4)
    rng = np.random.default_rng(0)
    x = rng.random((rows, features), dtype=np.float32)
    np.savez(path, x=x, y=np.arange(rows) % 10)
    return path


def csv_file(path: Path, rows: int, features: int = 16) -> Path:
    """A .csv of `rows` rows of short numbers and an integer label (about 5 bytes a value)."""
    rng = np.random.default_rng(0)
    with open(path, "w") as handle:
        handle.write(",".join(f"f{i}" for i in range(features)) + ",label\n")
        for start in range(0, rows, 10_000):
            n = min(10_000, rows - start)
            block = np.hstack([rng.random((n, features)).round(2), (np.arange(n) % 3)[:, None]])
            np.savetxt(handle, block, fmt="%.2f", delimiter=",")
    return path


def image_zip(path: Path, count: int, side: int) -> Path:
    """A zip of `count` identical black RGB PNGs in two class folders: a few kilobytes that
    decode to count * side * side * 3 bytes of pixels (and four times that as float32)."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side)).save(buffer, "PNG")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(count):
            archive.writestr(f"c{i % 2}/{i}.png", buffer.getvalue())
    return path


def zeros_entry(archive: zipfile.ZipFile, name: str, mib: int, head: bytes = b"") -> None:
    """Write `head` then `mib` MiB of zeros as one deflated entry, streamed (a few hundred
    bytes of output per MiB; the test process never holds the zeros)."""
    zeros = bytes(MIB)
    with archive.open(name, "w", force_zip64=True) as entry:
        entry.write(head)
        for _ in range(mib):
            entry.write(zeros)


def zip_bomb(path: Path, mib: int) -> Path:
    """A zip whose one image entry is `mib` MiB of zeros: under a MiB on disk."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        zeros_entry(archive, "c0/0.png", mib)
    return path


def nested_zip_bomb(path: Path, mib: int) -> Path:
    """A zip holding zip bombs, once as a class folder's entry and once beside them."""
    inner = zip_bomb(path.with_suffix(".inner"), mib).read_bytes()
    path.with_suffix(".inner").unlink()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("c0/0.png", inner)
        archive.writestr("c1/1.zip", inner)
    return path


def image_bomb(path: Path, side: int) -> Path:
    """A zip of one black RGB PNG of side x side pixels: kilobytes whose 3 bytes a pixel
    fit the budget, while the decoder's copies take 11."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side)).save(buffer, "PNG", compress_level=1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("c0/0.png", buffer.getvalue())
    return path


def csv_bomb(path: Path, fields: int) -> Path:
    """A .csv whose header is one line of `fields` one-letter names: 2 bytes a field on
    disk, about 8 in a parsed list of Python strings (more once copied)."""
    with open(path, "w") as handle:
        handle.write("label")
        for _ in range(fields // 1_000_000):
            handle.write(",a" * 1_000_000)
        handle.write("\n0" + ",0" * 3 + "\n")
    return path


def npz_bomb(path: Path, mib: int, declared: tuple[int, ...]) -> Path:
    """An .npz whose x.npy declares float64 `declared` and holds `mib` MiB of zeros."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": declared}
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        zeros_entry(archive, "x.npy", mib, header.getvalue())  # the header starts with magic
        archive.writestr("y.npy", _npy(np.zeros(4, dtype=np.int64)))
    return path


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


class PeakMemory:
    """The growth of a process's resident memory at its worst since `reset`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = 0

    def _status(self, key: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def reset(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # resets VmHWM to VmRSS
        self.baseline = self._status("VmRSS")

    def growth(self) -> int:
        return self._status("VmHWM") - self.baseline


@dataclass
class Latencies:
    """Milliseconds of each `GET` answered while sampling ran."""

    values: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)  # time.perf_counter() of each GET
    statuses: set[int] = field(default_factory=set)

    def p(self, q: float) -> float:
        ordered = sorted(self.values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> str:
        return (
            f"n={len(self.values):5d}  p50={statistics.median(self.values):6.1f} ms  "
            f"p99={self.p(0.99):6.1f} ms  max={max(self.values):6.1f} ms"
        )


class Sampler:
    """GETs `url` back to back on its own connection, in a thread, until stopped."""

    def __init__(self, url: str, headers: dict[str, str], pause: float = 0.005) -> None:
        self.url, self.headers, self.pause = url, headers, pause
        self.latencies = Latencies()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(headers=self.headers, timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                answer = client.get(self.url)
                self.latencies.values.append((time.perf_counter() - started) * 1000)
                self.latencies.started.append(started)
                self.latencies.statuses.add(answer.status_code)
                time.sleep(self.pause)

    def __enter__(self) -> Latencies:
        self._thread.start()
        return self.latencies

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def upload(url: str, headers: dict[str, str], path: Path, timeout: float = 600) -> httpx.Response:
    with open(path, "rb") as handle:
        return httpx.post(
            f"{url}/v1/datasets",
            headers=headers,
            files={"file": (path.name, handle)},
            timeout=timeout,
        )
