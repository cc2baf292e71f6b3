"""Streaming an object from the object store with HTTP Range support (RFC 9110, 14).

The local backend's files go out through Starlette's `FileResponse`; objects in S3 are
streamed here from ranged GETs, chunk by chunk, with the same headers: Content-Length,
Accept-Ranges, and for a single satisfiable range a 206 with Content-Range. A request for
several ranges is answered whole (a server may ignore Range), one that cannot be satisfied
with 416 and `Content-Range: bytes */size`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from starlette.responses import Response, StreamingResponse

from archsearch.api.errors import error_response
from archsearch.jobs.platform.objects import ObjectStore

SINGLE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Unsatisfiable(ValueError):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """`(start, stop)` of the one range asked for, stop exclusive; None: send it whole."""
    if header is None:
        return None
    match = SINGLE_RANGE.fullmatch(header.strip())
    if match is None:
        return None  # several ranges, or another unit: answer with the whole object
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # a suffix: the last N bytes
        length = int(last)
        if length == 0 or size == 0:
            raise Unsatisfiable(header)
        return max(0, size - length), size
    start = int(first)
    # A last byte before the first asks for nothing this file holds: 416 like a start past
    # the end, so a client learns the size instead of receiving the whole file unasked.
    if start >= size or (last and int(last) < start):
        raise Unsatisfiable(header)
    return start, min(size, int(last) + 1) if last else size


def stream_object(
    objects: ObjectStore,
    key: str,
    size: int,
    range_header: str | None,
    media_type: str,
    headers: Mapping[str, str],
) -> Response:
    """The object under `key` (of `size` bytes), whole or the asked range, streamed."""
    base = {**headers, "Accept-Ranges": "bytes"}
    try:
        wanted = parse_range(range_header, size)
    except Unsatisfiable:
        detail = f"range {range_header!r} is outside the {size} bytes of this file"
        return error_response(
            "range_not_satisfiable", detail, 416, {"Content-Range": f"bytes */{size}"}
        )
    start, stop = wanted or (0, size)
    base["Content-Length"] = str(stop - start)
    status = 200
    if wanted is not None:
        status = 206
        base["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
    # A sync iterator: Starlette pulls it in its thread pool, so boto3 never blocks the loop.
    body = objects.iter_range(key, start, stop)
    return StreamingResponse(body, status_code=status, media_type=media_type, headers=base)
