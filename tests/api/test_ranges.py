"""Parsing the Range header of an object download (RFC 9110, 14.1.2)."""

from __future__ import annotations

import pytest

from archsearch.api.ranges import Unsatisfiable, parse_range


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=0-99", (0, 100)),
        ("bytes=10-", (10, 1000)),
        ("bytes=990-5000", (990, 1000)),  # a last byte past the end is cut to it
        ("bytes=-100", (900, 1000)),
        ("bytes=-5000", (0, 1000)),
        ("bytes=0-0", (0, 1)),
        ("bytes=0-9,20-29", None),  # several ranges: the whole object
        ("items=0-9", None),  # another unit: ignored
        ("bytes=-", None),
    ],
)
def test_satisfiable_or_ignored(header: str | None, expected: tuple[int, int] | None) -> None:
    assert parse_range(header, 1000) == expected


@pytest.mark.parametrize(
    ("header", "size"),
    [
        ("bytes=1000-", 1000),
        ("bytes=-0", 1000),
        ("bytes=-1", 0),
        ("bytes=50-10", 1000),  # the last byte before the first
        ("bytes=5-1", 1000),
    ],
)
def test_unsatisfiable(header: str, size: int) -> None:
    with pytest.raises(Unsatisfiable):
        parse_range(header, size)
