"""Reading zip archives (and the zip inside every .npz) without trusting them.

Before any byte is decompressed: the number of entries, every entry's path (no absolute
paths, no '..', no encryption) and the sum of the declared uncompressed sizes are checked.
Declared sizes can lie, so the bytes actually produced are counted too, against one budget
shared by every entry of the upload. Nothing is ever extracted to disk.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from archsearch.jobs.domain.datasets.options import UploadLimits
from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded, UnsafeArchive

CHUNK = 1 << 20
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


class ByteBudget:
    """Decompressed bytes one upload may still produce."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limit = limits.max_uncompressed_bytes
        self.used = 0

    def spend(self, count: int) -> None:
        self.used += count
        if self.used > self.limit:
            raise LimitExceeded(
                "the uncompressed size of the upload", self.limit, "upload_max_uncompressed_bytes"
            )


class MemoryBudget:
    """Bytes of arrays one upload may hold in memory: what it decodes to (pixels, parsed
    rows, .npz/IDX arrays) plus the float32 copy validation makes. Charged before or while
    the arrays are filled, never after, so a small file cannot decode to gigabytes."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limit = limits.max_memory_bytes
        self.used = 0

    def spend(self, count: int, what: str = "the decoded arrays of the upload") -> None:
        self.require_room(count, what)
        self.used += count

    def require_room(self, count: int, what: str) -> None:
        """Refuse before allocating `count` bytes that are held only for a moment (an entry's
        compressed bytes, one image being decoded, one parsed row): they are not kept, so
        they are not spent, but they must fit beside what is."""
        if self.used + count > self.limit:
            raise LimitExceeded(
                f"{what} ({self.used + count:,} bytes in memory)",
                self.limit,
                "upload_max_memory_bytes",
            )


def is_zip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) in ZIP_MAGIC


def check_entry_name(name: str) -> None:
    """Refuse the paths a careless extractor would write outside its folder."""
    path = PurePosixPath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"zip entry {name!r} has an absolute path; entries must be relative")
    if ".." in path.parts:
        raise UnsafeArchive(
            f"zip entry {name!r} contains '..'; entries must stay inside the archive"
        )


def check_archive(archive: zipfile.ZipFile, limits: UploadLimits) -> list[zipfile.ZipInfo]:
    """The archive's file entries (directories dropped), after every pre-read check."""
    entries = archive.infolist()
    if len(entries) > limits.max_entries:
        raise LimitExceeded(
            f"the zip's {len(entries):,} entries",
            limits.max_entries,
            "upload_max_entries",
            "entries",
        )
    declared = 0
    for info in entries:
        check_entry_name(info.filename)
        if info.flag_bits & 0x1:
            raise UnsafeArchive(
                f"zip entry {info.filename!r} is encrypted; upload an unencrypted zip"
            )
        declared += info.file_size
    if declared > limits.max_uncompressed_bytes:
        raise LimitExceeded(
            f"the declared uncompressed size of the zip ({declared:,} bytes)",
            limits.max_uncompressed_bytes,
            "upload_max_uncompressed_bytes",
        )
    return [info for info in entries if not info.is_dir()]


@contextmanager
def open_archive(
    path: Path, limits: UploadLimits, label: str = "zip"
) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    """Open and check an archive; a damaged one is an InvalidUpload naming what to do."""
    try:
        archive = zipfile.ZipFile(path)
    except DAMAGED as exc:
        raise InvalidUpload(
            f"the {label} file is truncated or damaged ({exc}); upload it again"
        ) from None
    with archive:
        yield archive, check_archive(archive, limits)


def read_entry(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: ByteBudget, memory: MemoryBudget
) -> bytearray:
    """All bytes of one entry, counted against the budget while they are produced.

    zipfile never yields more than an entry's declared size (a lying entry fails its CRC
    check), so that size is checked against the memory budget and allocated once, before a
    byte is decompressed: a small zip of zeros cannot grow the process past the budget."""
    memory.require_room(info.file_size, f"zip entry {info.filename!r} decompressed")
    data = bytearray(info.file_size)
    view, filled = memoryview(data), 0
    try:
        with archive.open(info) as handle:
            assert isinstance(handle, zipfile.ZipExtFile)  # typeshed says IO[bytes]
            while count := handle.readinto(view[filled : filled + CHUNK]):
                budget.spend(count)
                filled += count
    except DAMAGED as exc:
        raise InvalidUpload(
            f"zip entry {info.filename!r} is damaged ({exc}); upload the archive again"
        ) from None
    finally:
        view.release()
    if filled != info.file_size:
        raise InvalidUpload(f"zip entry {info.filename!r} is truncated; upload the archive again")
    return data


def gunzip(
    data: bytes | bytearray, name: str, budget: ByteBudget, memory: MemoryBudget
) -> bytearray:
    """Decompress a .gz entry chunk by chunk, never past the budget (a gzip bomb stops early).
    The output grows in place (no list of chunks joined into a second copy)."""
    inflater = zlib.decompressobj(wbits=31)
    out = bytearray()
    try:
        chunk = inflater.decompress(data, CHUNK)
        while chunk:
            budget.spend(len(chunk))
            memory.spend(len(chunk), f"{name!r} decompressed")
            out += chunk
            chunk = inflater.decompress(inflater.unconsumed_tail, CHUNK)
    except zlib.error as exc:
        raise InvalidUpload(f"{name!r} is not valid gzip data ({exc})") from None
    if not inflater.eof:
        raise InvalidUpload(f"{name!r} is a truncated gzip file")
    return out
