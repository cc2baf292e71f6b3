"""The dashboard's pages, served by the API process at `/`, same origin.

A page is an HTML shell; its numbers come from the `/v1` routes (the same service and
presenter functions as every client), fetched and followed live by the page's script. The
job page embeds its first state from the same presenter the API's `GET /v1/jobs/{id}` uses.

Team mode needs a signed-in session (`session.py`); embedded `serve` needs no sign-in.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from archsearch.api.deps import AuthThrottleDep, app_state
from archsearch.api.presenters import job_with_queue_state
from archsearch.api.signing import WebSession, new_session
from archsearch.api.throttle import TooManyAttempts, client_address
from archsearch.api.web import session as web_session
from archsearch.jobs.domain.accounts.service import LOCAL_USER, Principal, authenticate
from archsearch.jobs.domain.errors import AmbiguousId, Forbidden, NotFound, Unauthenticated
from archsearch.jobs.domain.jobs import listing, repository
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.jobs.domain.studies import summary as studies_summary
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import PRIORITY_LEVELS, TERMINAL_STATUSES, JobStatus
from archsearch.schemas.studies import ENDED_STUDY_STATUSES
from archsearch.specs import METHOD_NAMES, job_spec_adapter

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
# Embedded JSON keeps its order: the submit form lists a spec's fields as the spec does.
templates.env.policies["json.dumps_kwargs"] = {"sort_keys": False}
router = APIRouter(include_in_schema=False)

# Scripts and styles only from this origin; no frames of our pages elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
    "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def mount(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")


def _services(request: Request) -> Services:
    return app_state(request).services


def viewer(request: Request) -> tuple[Principal, WebSession | None] | None:
    """Who looks at the page: the local user when embedded, the session's user in team
    mode, or None (sign in first). Looked up once per request, through the API's cache of
    verified principals."""
    if not hasattr(request.state, "viewer"):
        request.state.viewer = _look_up_viewer(request)
    seen: tuple[Principal, WebSession | None] | None = request.state.viewer
    return seen


def _look_up_viewer(request: Request) -> tuple[Principal, WebSession | None] | None:
    state = app_state(request)
    if not state.services.settings.tokens_required:
        return LOCAL_USER, None
    web = web_session.session_of(request)
    if web is None:
        return None
    with state.services.sessions() as session:
        try:
            principal = web_session.remembered_principal(
                state.token_cache,
                web.principal_key,
                lambda: web_session.principal_for_credentials(session, "", web),
            )
        except Unauthenticated:
            return None
    return principal, web


# The wire's words, handed to every page so its scripts never spell them again.
VOCABULARY = {
    "statuses": [status.value for status in JobStatus],
    "terminal": sorted(status.value for status in TERMINAL_STATUSES),
    "priorities": dict(PRIORITY_LEVELS),
    "study_ended": sorted(status.value for status in ENDED_STUDY_STATUSES),
}


def render(
    request: Request, name: str, page: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    seen = viewer(request)
    principal, web = seen if seen is not None else (None, None)
    base = {
        "vocabulary": VOCABULARY,
        "page": page,
        "principal": principal,
        "team_mode": _services(request).settings.tokens_required,
        "csrf": web.csrf if web else "",
    }
    response = templates.TemplateResponse(request, name, {**base, **context}, status_code=status)
    response.headers.update(SECURITY_HEADERS)
    return response


def page(request: Request, name: str, page_name: str, **context: Any) -> Response:
    if viewer(request) is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/signin?next={quote(target)}", status_code=303)
    return render(request, name, page_name, context)


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request) -> Response:
    return page(request, "jobs.html", "jobs", methods=METHOD_NAMES)


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str) -> Response:
    seen = viewer(request)
    if seen is None:
        return page(request, "job.html", "job")
    services = _services(request)
    try:
        with services.sessions() as session:
            found = listing.resolve_job_id(session, job_id, seen[0].team_filter)
            if str(found) != job_id:  # a start of the id: the page's own address is whole
                return canonical(request, f"/jobs/{found}")
            job = repository.read_job_row(session, found, seen[0].team_filter)
            initial = job_with_queue_state(session, job, services.settings)
    except NotFound:
        # Another team's job answers exactly as a missing one, as the API does.
        return render(request, "not_found.html", "job", {"what": f"job {job_id}"}, 404)
    except AmbiguousId as error:
        what = f"single job starting {job_id} (it starts {', '.join(error.candidates)})"
        return render(request, "not_found.html", "job", {"what": what}, 409)
    return render(
        request, "job.html", "job", {"job_id": job_id, "initial": initial.model_dump(mode="json")}
    )


@functools.cache
def spec_schema() -> dict[str, Any]:
    """The JSON schema of every job spec, built once (it takes pydantic ~100 ms)."""
    return job_spec_adapter.json_schema()


@router.get("/submit", response_class=HTMLResponse)
def submit_page(request: Request) -> Response:
    return page(request, "submit.html", "submit", schema=spec_schema(), methods=METHOD_NAMES)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request) -> Response:
    return page(request, "compare.html", "compare")


@router.get("/queue", response_class=HTMLResponse)
def queue_page(request: Request) -> Response:
    return page(request, "queue.html", "queue")


@router.get("/datasets", response_class=HTMLResponse)
def datasets_page(request: Request) -> Response:
    return page(request, "datasets.html", "datasets")


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request) -> Response:
    return page(request, "models.html", "models", model_name="")


@router.get("/models/{name}", response_class=HTMLResponse)
def model_page(request: Request, name: str) -> Response:
    """One model: its versions (lineage, files), aliases and their history, from
    `GET /v1/models/{name}` (so another team's model says "not found" like the API)."""
    return page(request, "models.html", "models", model_name=name)


@router.get("/studies", response_class=HTMLResponse)
def studies_page(request: Request) -> Response:
    return page(request, "studies.html", "studies")


@router.get("/studies/{study_id}", response_class=HTMLResponse)
def study_page(request: Request, study_id: str) -> Response:
    """A study's first state, from the same summary `GET /v1/studies/{id}` gives, and its
    jobs (those asked later come from `GET /v1/jobs?study=` and the jobs stream)."""
    seen = viewer(request)
    if seen is None:
        return page(request, "study.html", "studies")
    services = _services(request)
    try:
        with services.sessions() as session:
            found = studies_repository.resolve_study_id(session, study_id, seen[0].team_filter)
            if str(found) != study_id:  # a start of the id: the page's own address is whole
                return canonical(request, f"/studies/{found}")
            detail = studies_summary.read_study(session, found, seen[0].team_filter)
            jobs = [study_job(job) for job in studies_repository.study_jobs(session, detail.id)]
    except NotFound:
        # Another team's study answers exactly as a missing one, as the API does.
        return render(request, "not_found.html", "studies", {"what": f"study {study_id}"}, 404)
    except AmbiguousId as error:
        what = f"single study starting {study_id} (it starts {', '.join(error.candidates)})"
        return render(request, "not_found.html", "studies", {"what": what}, 409)
    context = {"study_id": study_id, "initial": detail.model_dump(mode="json"), "jobs": jobs}
    return render(request, "study.html", "studies", context)


def canonical(request: Request, path: str) -> Response:
    """The same page at its whole-id address (a bookmark then names one resource for good)."""
    query = request.url.query
    return RedirectResponse(f"{path}?{query}" if query else path, status_code=307)


def study_job(job: Job) -> dict[str, Any]:
    training = job.spec.get("training") or {}
    return {
        "id": str(job.id),
        "arm": job.study_arm,
        "trial": job.study_trial,
        "seed": training.get("seed") if isinstance(training, dict) else None,
        "status": JobStatus(job.status).value,
    }


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, next: str = "/") -> Response:
    return render(request, "signin.html", "signin", {"next": safe_next(next), "error": None})


@router.post("/signin", response_class=HTMLResponse)
def sign_in(
    request: Request,
    token: Annotated[str, Form(max_length=200)],
    throttle: AuthThrottleDep,
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Check the token as the API checks a bearer token, then set the session cookie."""
    services = _services(request)
    try:
        # No session exists yet, so no CSRF token: refuse a sign-in posted by another site.
        web_session.check_origin(request)
        with services.sessions() as session:
            authenticate(session, f"Bearer {token.strip()}")
    except (Unauthenticated, Forbidden) as exc:
        context = {"next": safe_next(next), "error": str(exc)}
        try:
            if isinstance(exc, Unauthenticated):  # a correct token is never counted
                throttle.failed(client_address(request), token)
        except TooManyAttempts as refused:
            page = render(request, "signin.html", "signin", {**context, "error": str(refused)}, 429)
            page.headers["Retry-After"] = str(refused.retry_after)
            return page
        return render(request, "signin.html", "signin", context, status=401)
    response = RedirectResponse(safe_next(next), status_code=303)
    signer = app_state(request).session_signer
    response.set_cookie(
        web_session.COOKIE,
        signer.dumps(new_session(token)),
        max_age=signer.max_age,
        httponly=True,
        secure=request.url.scheme == "https",
        samesite="strict",
    )
    return response


@router.post("/signout")
def sign_out(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
    web = web_session.session_of(request)
    if web is not None:
        web_session.check_form_csrf(request, web, csrf)
        with _services(request).sessions() as session, session.begin():
            web_session.sign_out(request, session, web)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(web_session.COOKIE, httponly=True, samesite="strict")
    return response


def safe_next(target: str) -> str:
    """Only a path of this site: never an open redirect to another host."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
