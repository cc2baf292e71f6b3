"""Input PostgreSQL would refuse (a NUL byte, a lone surrogate, a number past its column) is
a 422 naming the field, on the real PostgreSQL-backed API, in every place it can arrive:
query and path parameters, JSON bodies and upload forms. Before, each one reached the
database driver and answered 500."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.errors import ErrorBody

pytestmark = pytest.mark.service

JOB_ID = uuid.uuid4()
NUL = "%00"
CSV = b"a,b,label\n" + b"".join(b"%d,%d,%d\n" % (i, -i, i % 2) for i in range(40))


def _assert_refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, (field, response.status_code, response.text)
    body = ErrorBody.model_validate(response.json())
    assert not isinstance(body.detail, str), body
    assert field in [error.field for error in body.detail], (field, body)


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("GET", f"/v1/jobs?method=train{NUL}", "query.method"),
        ("GET", f"/v1/jobs?status=queued&method=a{NUL}b", "query.method"),
        ("GET", f"/v1/jobs?id_prefix=ab{NUL}", "query.id_prefix"),
        ("GET", f"/v1/jobs?cursor=x{NUL}", "query.cursor"),
        ("GET", f"/v1/jobs/{JOB_ID}/metrics?name=loss{NUL}", "query.name"),
        ("GET", f"/v1/jobs/{JOB_ID}/artifacts/model{NUL}.pt", "path.name"),
        ("GET", f"/v1/jobs/{JOB_ID}/logs?after={2**64}", "query.after"),
        ("GET", f"/v1/datasets/ds-{NUL}", "path.dataset_id"),
        ("GET", f"/v1/datasets/ds-{NUL}/preview.png", "path.dataset_id"),
        ("DELETE", f"/v1/datasets/ds-{NUL}", "path.dataset_id"),
    ],
)
def test_parameters_the_database_refuses_are_422(
    api_url: str, auth_headers: dict[str, str], method: str, path: str, field: str
) -> None:
    _assert_refused(httpx.request(method, api_url + path, headers=auth_headers), field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"label": "nightly\u0000run"}, "label"),
        ({"label": "\ud800"}, "label"),  # a lone surrogate: not UTF-8 at all
        ({"dataset": {"id": "ds-\u0000"}}, "dataset.id"),
        ({"dataset": {"name": "digits\u0000"}}, "dataset.name"),
    ],
)
def test_json_strings_the_database_refuses_are_422(
    api_url: str,
    auth_headers: dict[str, str],
    sessions: sessionmaker[Session],
    body: dict[str, object],
    field: str,
) -> None:
    spec = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}, **body}
    with sessions() as session:
        before = session.scalar(select(func.count()).select_from(Job))
    # json.dumps escapes a lone surrogate as `\ud800`, as a hostile client would send it.
    content = json.dumps(spec)
    headers = {**auth_headers, "Content-Type": "application/json"}
    response = httpx.post(f"{api_url}/v1/jobs", content=content, headers=headers)
    _assert_refused(response, field)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == before  # no row


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"name": "mine\u0000"}, "name"),
        ({"label_column": "label\u0000"}, "label_column"),
    ],
)
def test_upload_form_text_the_database_refuses_is_422(
    api_url: str,
    auth_headers: dict[str, str],
    sessions: sessionmaker[Session],
    form: dict[str, str],
    field: str,
) -> None:
    with sessions() as session:
        before = session.scalar(select(func.count()).select_from(UploadedDataset))
    response = httpx.post(
        f"{api_url}/v1/datasets",
        data=form,
        files={"file": ("data.csv", CSV, "text/csv")},
        headers=auth_headers,
    )
    _assert_refused(response, field)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(UploadedDataset)) == before
