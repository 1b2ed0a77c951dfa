"""The inspector's web application: pages and JSON for the runs of one store. Read-only.

Pages are rendered on the server from the same views as ``resumable runs`` and
``resumable show`` (:mod:`resumable.durability.runs.stored`), so every record is verified
before anything in it is decoded. A store that fails is reported on the page and
tried again on the next request; a run whose log cannot be verified is shown as such.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from resumable.config import Config
from resumable.durability.effects.call_sites import describe_call
from resumable.durability.runs.stored import RunRow, list_runs, show_run
from resumable.errors import (
    DecryptionError,
    RecordError,
    ResumableError,
    RunNotFoundError,
    UsageError,
)
from resumable.store.base import LISTED_STATUSES
from resumable.ui.access import Hardened, HostGuard, TokenGuard, request_token
from resumable.ui.source import RunSource
from resumable.ui.timeline import read_timeline

LIST_STATUSES = LISTED_STATUSES
TIMELINE_LIMIT = 1000
"""Records shown on a run's timeline (the newest); the count says how many there are."""


def create_app(
    config: Config,
    env: Mapping[str, str],
    *,
    token: str | None = None,
    hosts: tuple[str, ...] = (),
) -> Starlette:
    """The inspector for the store ``config`` names.

    With ``token``, every request must carry it. Without one, only requests addressed
    to a loopback name or to one of ``hosts`` are answered (no DNS rebinding).
    """
    pages = _Pages(RunSource(config, env))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await pages.source.close()

    guard = (
        Middleware(TokenGuard, token=token)
        if token is not None
        else Middleware(HostGuard, hosts=hosts)
    )
    return Starlette(
        routes=[
            Route("/", pages.runs),
            Route("/runs/{run_id:path}", pages.run),
            Route("/api/runs", pages.runs_json),
            Route("/api/runs/{run_id:path}", pages.run_json),
            Mount("/static", StaticFiles(packages=[("resumable.ui", "static")]), name="static"),
        ],
        middleware=[Middleware(Hardened), guard],
        exception_handlers={HTTPException: pages.problem, Exception: pages.failure},
        lifespan=lifespan,
    )


class _Pages:
    """The request handlers, sharing one store and one template environment."""

    def __init__(self, source: RunSource) -> None:
        self.source = source
        environment = jinja2.Environment(
            loader=jinja2.PackageLoader("resumable.ui", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        environment.filters.update(
            when=_when, seconds=_seconds, numbered=_numbered, site=describe_call
        )
        self.templates = Jinja2Templates(env=environment)

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("title", "resumable")
        return self.templates.TemplateResponse(
            request,
            name,
            {"link": _linker(request), "store": self.source.description, **context},
            status_code=status,
        )

    # -- pages ----------------------------------------------------------------------
    async def runs(self, request: Request) -> Response:
        wanted = _status(request)
        listing: dict[str, Any] = {"statuses": LIST_STATUSES, "wanted": wanted}
        try:
            rows, attempts = await self._rows()
        except ResumableError as error:
            await self.source.failed(error)
            return self.render(
                request,
                "runs.html",
                503,
                rows=[],
                attempts={},
                total=0,
                error=error.message,
                **listing,
            )
        shown = [r for r in rows if wanted in (None, r.status)]
        return self.render(
            request,
            "runs.html",
            rows=shown,
            attempts=attempts,
            total=len(rows),
            error=None,
            **listing,
        )

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        at = _at(request)
        try:
            store = await self.source.store()
            codec = await self.source.codec()
            view = await show_run(store, codec, run_id, at=at)
            timeline = await read_timeline(store, codec, run_id)
            meta = await store.get_meta(run_id)
            forks = [s.meta.run_id for s in await store.list_runs() if s.meta.parent == run_id]
        except RunNotFoundError:
            return self.render(
                request, "not_found.html", 404, title="no such run", what=f"run {run_id}"
            )
        except UsageError:  # a record the run does not have
            raise HTTPException(
                400, f"run {run_id} has no record {at}: pick one on its timeline"
            ) from None
        except (RecordError, DecryptionError) as error:
            return self.render(
                request, "corrupted.html", title=f"run {run_id}", run_id=run_id, error=error.message
            )
        except ResumableError as error:
            await self.source.failed(error)
            return self.render(request, "unreachable.html", 503, error=error.message)
        total = len(timeline.entries)
        timeline.entries = timeline.entries[-TIMELINE_LIMIT:]
        return self.render(
            request,
            "run.html",
            title=f"run {run_id}",
            view=view,
            meta=meta,
            forks=forks,
            at=at,
            timeline=timeline,
            total=total,
            live=at is None and view.status in ("running", "pending"),
        )

    async def problem(self, request: Request, exc: Exception) -> Response:
        """A 404 for an address that is nothing, a 400 or 405 for a request that is wrong."""
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        message = "not found" if status == 404 else exc.detail
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        if status == 404:
            return self.render(
                request, "not_found.html", 404, title="not found", what=request.url.path
            )
        return self.render(request, "problem.html", status, title="bad request", error=message)

    async def failure(self, request: Request, exc: Exception) -> Response:
        """A 500 that says what went wrong (the traceback goes to the server's stderr)."""
        message = f"the inspector could not read this ({type(exc).__name__}: {exc}); try again"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=500)
        return self.render(request, "problem.html", 500, title="inspector error", error=message)

    # -- JSON -----------------------------------------------------------------------
    async def runs_json(self, request: Request) -> Response:
        wanted = _status(request)
        try:
            rows, _ = await self._rows()
        except ResumableError as error:
            await self.source.failed(error)
            return JSONResponse({"error": error.message}, status_code=503)
        return JSONResponse([r.to_json() for r in rows if wanted in (None, r.status)])

    async def run_json(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            store = await self.source.store()
            view = await show_run(store, await self.source.codec(), run_id, at=_at(request))
        except RunNotFoundError as error:
            return JSONResponse({"error": error.message}, status_code=404)
        except UsageError as error:
            return JSONResponse({"error": error.message}, status_code=400)
        except (RecordError, DecryptionError) as error:
            return JSONResponse({"error": error.message, "corrupted": True}, status_code=500)
        except ResumableError as error:
            await self.source.failed(error)
            return JSONResponse({"error": error.message}, status_code=503)
        # as `show --json` prints it (values it cannot encode as their str)
        body = json.dumps(view.to_json(), default=str)
        return Response(body, media_type="application/json")

    async def _rows(self) -> tuple[list[RunRow], dict[str, int]]:
        """The runs as ``resumable runs`` lists them, and how many times each was started."""
        store = await self.source.store()
        rows = await list_runs(store)
        attempts = {s.meta.run_id: s.meta.epoch for s in await store.list_runs()}
        return rows, attempts


def _status(request: Request) -> str | None:
    wanted = request.query_params.get("status") or None
    if wanted is not None and wanted not in LIST_STATUSES:
        raise HTTPException(
            400, f"status={wanted!r} is not a status; use one of {', '.join(LIST_STATUSES)}"
        )
    return wanted


def _at(request: Request) -> int | None:
    raw = request.query_params.get("at") or None
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise HTTPException(400, f"at={raw!r} is not a record number") from None


def _linker(request: Request) -> Any:
    """``link(path, **query)``: a URL that carries the request's ``?token=`` along."""
    token = request.query_params.get("token") if request_token(request.scope) else None

    def link(path: str, **query: Any) -> str:
        params = {k: v for k, v in query.items() if v is not None}
        if token:
            params["token"] = token
        return quote(path) + ("?" + urlencode(params) if params else "")

    return link


def _numbered(text: str, first: int = 1) -> list[tuple[int, str]]:
    """The lines of ``text`` with their numbers in the response, from ``first``."""
    return list(enumerate(text.splitlines(), first))


def _when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"+{value * 1000:.0f} ms" if value < 1 else f"+{value:.1f} s"
