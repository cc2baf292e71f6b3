"""Datasets: the built-ins this server has, and uploads (list, upload, read, preview, delete).

An upload arrives as multipart; Starlette spools it to a temporary file, and the service
copies it to the dataset store in chunks. A declared Content-Length over the limit is
refused before the body is read (`api/limits.py`, as every request body).

Reading and validating an upload costs CPU and up to `upload_max_memory_bytes` of memory
so it runs on a bounded executor of `upload_concurrent_validations` threads
(default 1): the event loop and the request thread pool stay free for other requests, and
the API's memory stays bounded however many uploads arrive together (the others wait in the
executor's queue, their files on disk, holding no thread). An executor in the API process
rather than a worker task: the embedded mode has no worker, and the upload's answer stays
the checked dataset (201), or its error, with no state to poll.
"""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, File, Form, Request, Response, UploadFile, status

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import SessionDep, SettingsDep, app_state
from archsearch.api.presenters import builtin_dataset, uploaded_dataset, uploaded_summary
from archsearch.api.storable import require_storable
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.datasets import service as uploads
from archsearch.jobs.domain.datasets.options import UploadOptions
from archsearch.schemas.datasets import DatasetsPublic, UploadedDatasetPublic
from archsearch.schemas.errors import ErrorBody

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])
# Parsing an upload (a .csv row by row) is the API's one CPU-bound Python code. With the
# default 5 ms GIL switch interval the event loop waits up to 5 ms at each of the dozens of
# GIL hand-offs a request takes: measured on a busy 2-core machine, GET /v1/jobs/{id} p99
# went from 88 ms idle to 399-455 ms during a 32 MiB csv; with 0.5 ms it stays near the idle
# figure (bench/upload.py). `create_app` sets it for the API process, never at import.
GIL_SWITCH_INTERVAL = 0.0005


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    settings: SettingsDep, session: SessionDep, principal: CurrentUser
) -> DatasetsPublic:
    builtins = [builtin_dataset(info) for info in catalog.built_in(settings)]
    uploaded = [uploaded_summary(d) for d in uploads.list_datasets(session, principal)]
    return DatasetsPublic(data=builtins + uploaded)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=UploadedDatasetPublic,
    responses={
        200: {"description": "the same upload was stored before", "model": UploadedDatasetPublic},
        # Starlette refuses a multipart body it cannot parse before any handler runs.
        400: {"model": ErrorBody, "description": "the body is not valid multipart form data"},
    },
)
async def upload_dataset(
    file: Annotated[
        UploadFile, File(description=".npz, .csv, or .zip of IDX files / image folders")
    ],
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    response: Response,
    principal: CurrentUser,
    name: Annotated[str | None, Form(max_length=200)] = None,
    label_column: Annotated[
        str, Form(min_length=1, max_length=200, description="csv only")
    ] = "label",
    test_fraction: Annotated[
        float, Form(gt=0, lt=1, description="if the upload has no test split")
    ] = 0.2,
    split_seed: Annotated[int, Form(ge=0)] = 0,
    num_classes: Annotated[int | None, Form(ge=2, le=100_000)] = None,
) -> UploadedDatasetPublic:
    text_fields = {"name": name, "label_column": label_column, "file": file.filename}
    require_storable("body", text_fields)
    options = UploadOptions(name, label_column, test_fraction, split_seed, num_classes)
    upload = functools.partial(
        uploads.upload_dataset,
        session,
        settings,
        file.file,
        file.filename or "",
        options,
        principal,
    )
    dataset, created = await app_state(request).upload_slots.validate(upload)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    response.headers["Location"] = f"/v1/datasets/{dataset.id}"
    return uploaded_dataset(dataset)


@router.get("/{dataset_id}", response_model=UploadedDatasetPublic)
def read_dataset(
    dataset_id: str, session: SessionDep, principal: CurrentUser
) -> UploadedDatasetPublic:
    return uploaded_dataset(uploads.read_dataset(session, dataset_id, principal))


@router.get(
    "/{dataset_id}/preview.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
def read_preview(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> Response:
    # A small PNG sent whole: a plain Response ignores Range headers (allowed by RFC 9110),
    # where FileResponse would answer a bad range with its own plain-text 400/416.
    path = uploads.preview_path(session, settings, dataset_id, principal)
    return Response(path.read_bytes(), media_type="image/png")


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> Response:
    uploads.delete_dataset(session, settings, dataset_id, principal)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
