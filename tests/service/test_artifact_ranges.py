"""Range requests on an artifact kept by the local backend follow the same rules as S3's
(`api/ranges.py`): a single range is a 206, one that asks for nothing the file holds
(`bytes=5-1`, or a start past the end) a 416 with `Content-Range: bytes */size`. The S3 path
is covered by tests/api/test_ranges.py and test_object_storage.py."""

from __future__ import annotations

import httpx
import pytest

from archsearch.client import ArchsearchClient
from archsearch.schemas.errors import ErrorBody

pytestmark = pytest.mark.service

DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


def test_local_artifact_ranges_follow_the_s3_rules(
    client: ArchsearchClient, api_url: str, auth_headers: dict[str, str]
) -> None:
    job = client.wait(client.submit(DIGITS_JOB).id, timeout=180)
    assert job.status == "succeeded", job.error
    url = f"{api_url}/v1/jobs/{job.id}/artifacts/model.safetensors"
    full = httpx.get(url, headers=auth_headers)
    assert full.status_code == 200
    size = len(full.content)

    part = httpx.get(url, headers={**auth_headers, "Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == full.content[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{size}"

    for header in ("bytes=5-1", f"bytes={size}-", "bytes=-0"):
        refused = httpx.get(url, headers={**auth_headers, "Range": header})
        assert refused.status_code == 416, (header, refused.status_code, refused.text)
        assert refused.headers["content-range"] == f"bytes */{size}", header
        assert ErrorBody.model_validate(refused.json()).error == "range_not_satisfiable"

    # Several ranges: answered whole, as from S3.
    several = httpx.get(url, headers={**auth_headers, "Range": "bytes=0-1,5-6"})
    assert several.status_code == 200 and several.content == full.content
