"""Datasets: the built-ins this server has, and uploads (list, upload, read, preview, delete).

An upload arrives as multipart; Starlette spools it to a temporary file, and the service
copies it to the dataset store in chunks. A declared Content-Length over the limit is
refused before the body is read (`api/limits.py`, as every request body).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile, status
from fastapi.responses import FileResponse

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import SessionDep, SettingsDep
from archsearch.api.presenters import builtin_dataset, uploaded_dataset, uploaded_summary
from archsearch.api.storable import require_storable
from archsearch.core.data.catalog import available_datasets
from archsearch.jobs.domain.datasets import service as uploads
from archsearch.jobs.domain.datasets.options import UploadOptions
from archsearch.schemas.datasets import DatasetsPublic, UploadedDatasetPublic

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    settings: SettingsDep, session: SessionDep, principal: CurrentUser
) -> DatasetsPublic:
    builtins = [builtin_dataset(info) for info in available_datasets(settings.data_dirs)]
    uploaded = [uploaded_summary(d) for d in uploads.list_datasets(session, principal)]
    return DatasetsPublic(data=builtins + uploaded)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=UploadedDatasetPublic,
    responses={
        200: {"description": "the same upload was stored before", "model": UploadedDatasetPublic}
    },
)
def upload_dataset(
    file: Annotated[
        UploadFile, File(description=".npz, .csv, or .zip of IDX files / image folders")
    ],
    session: SessionDep,
    settings: SettingsDep,
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
    dataset, created = uploads.upload_dataset(
        session, settings, file.file, file.filename or "", options, principal
    )
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    response.headers["Location"] = f"/v1/datasets/{dataset.id}"
    return uploaded_dataset(dataset)


@router.get("/{dataset_id}", response_model=UploadedDatasetPublic)
def read_dataset(
    dataset_id: str, session: SessionDep, principal: CurrentUser
) -> UploadedDatasetPublic:
    return uploaded_dataset(uploads.read_dataset(session, dataset_id, principal))


@router.get("/{dataset_id}/preview.png", response_class=FileResponse)
def read_preview(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> FileResponse:
    path = uploads.preview_path(session, settings, dataset_id, principal)
    return FileResponse(path, media_type="image/png")


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> Response:
    uploads.delete_dataset(session, settings, dataset_id, principal)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
