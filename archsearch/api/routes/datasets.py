"""Datasets: the built-ins this server has, and uploads (list, upload, read, preview, delete).

An upload arrives as multipart; Starlette spools it to a temporary file, and the service
copies it to the dataset store in chunks. A declared Content-Length over the limit is refused
before the body is read.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, Response, UploadFile, status
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute

from archsearch.api.auth import CurrentUser
from archsearch.api.dataset_schemas import UploadedDatasetPublic, summary
from archsearch.api.deps import SessionDep, SettingsDep
from archsearch.api.schemas import DatasetPublic, DatasetsPublic
from archsearch.core.data.catalog import available_datasets
from archsearch.jobs.domain.datasets import repository
from archsearch.jobs.domain.datasets import service as uploads
from archsearch.jobs.domain.datasets.errors import DatasetNotFound, LimitExceeded
from archsearch.jobs.domain.datasets.options import UploadOptions

MULTIPART_OVERHEAD = 64 << 10  # boundaries and form fields around the file


class UploadLimitRoute(APIRoute):
    """Refuses an upload whose declared length is over the limit before reading its body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            length = request.headers.get("content-length", "")
            limit = request.app.state.services.settings.upload_max_bytes
            if (
                request.method == "POST"
                and length.isdigit()
                and int(length) > limit + MULTIPART_OVERHEAD
            ):
                raise LimitExceeded("the uploaded file", limit, "upload_max_bytes")
            return await handler(request)

        return guarded


router = APIRouter(prefix="/v1/datasets", tags=["datasets"], route_class=UploadLimitRoute)


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    settings: SettingsDep, session: SessionDep, principal: CurrentUser
) -> DatasetsPublic:
    builtins = [
        DatasetPublic(
            name=info.name,
            description=info.description,
            input_shape=list(info.input_shape),
            num_classes=info.num_classes,
            train_size=info.train_size,
            test_size=info.test_size,
        )
        for info in available_datasets(settings.data_dirs)
    ]
    uploaded = [
        summary(UploadedDatasetPublic.model_validate(d))
        for d in repository.list_datasets(session, principal.team_filter)
    ]
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
    principal.require("submit")
    options = UploadOptions(name, label_column, test_fraction, split_seed, num_classes)
    dataset, created = uploads.upload_dataset(
        session, settings, file.file, file.filename or "", options, principal.team_id
    )
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    response.headers["Location"] = f"/v1/datasets/{dataset.id}"
    return UploadedDatasetPublic.model_validate(dataset)


@router.get("/{dataset_id}", response_model=UploadedDatasetPublic)
def read_dataset(
    dataset_id: str, session: SessionDep, principal: CurrentUser
) -> UploadedDatasetPublic:
    dataset = repository.get_dataset(session, dataset_id, team_id=principal.team_filter)
    return UploadedDatasetPublic.model_validate(dataset)


@router.get("/{dataset_id}/preview.png", response_class=FileResponse)
def read_preview(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> FileResponse:
    dataset = repository.get_dataset(session, dataset_id, team_id=principal.team_filter)
    if dataset.kind != "images":
        raise DatasetNotFound(
            f"dataset {dataset_id} holds feature vectors {tuple(dataset.input_shape)}, not images: it has no preview"
        )
    return FileResponse(
        uploads.dataset_store(settings).preview_path(dataset.id), media_type="image/png"
    )


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(
    dataset_id: str, session: SessionDep, settings: SettingsDep, principal: CurrentUser
) -> Response:
    principal.require("submit")
    uploads.delete_dataset(session, settings, dataset_id, principal.team_filter)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
