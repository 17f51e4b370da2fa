"""The Starlette application: routes, the middleware that asks ``auth`` and sets the common
headers, static files from the package, and one clear page for a database the dashboard cannot
read (a schema older than this akadze: ``akadze db migrate``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import akadze.web.actions as actions
import akadze.web.bulk as bulk
import akadze.web.listing as listing
import akadze.web.pages as pages
import akadze.web.trends as trends
import akadze.web.workflows as workflows
from akadze.db.errors import sqlstate
from akadze.web.security import DashboardMiddleware, Keys

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.web import Auth

logger = logging.getLogger("akadze.web")


@dataclass(frozen=True, slots=True)
class Settings:
    """What every handler reads from ``request.app.state.dashboard``."""

    app: Akadze
    read_only: bool
    show_args: bool
    #: the CSRF key; None on a read-only dashboard, which has no form
    keys: Keys | None


def build(app: Akadze, *, auth: Auth | None, read_only: bool, show_args: bool) -> Starlette:
    """The dashboard's Starlette app for ``app``: its routes, the middleware that asks ``auth`` and
    sets the headers, and one handler that turns a failure into a one-line 503 or 500. With
    ``read_only`` it has no CSRF key and refuses every POST (akadze.web.create_app calls this)."""
    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", listing.jobs, name="jobs"),
        Route("/jobs/find", pages.find, name="find"),
        Route("/jobs/bulk", bulk.confirm, name="bulk"),
        Route("/jobs/bulk", bulk.bulk, methods=["POST"], name="bulk_action"),
        # the id is read by the page (pages.job_id_of), never by the router's int converter:
        # int() of thousands of digits raises, and a job id is at most 19 of them
        Route("/jobs/{job_id}", pages.job, name="job"),
        Route("/jobs/{job_id}/cancel", actions.cancel, methods=["POST"]),
        Route("/jobs/{job_id}/requeue", actions.requeue, methods=["POST"]),
        Route("/jobs/{job_id}/run-now", actions.run_now, methods=["POST"]),
        Route("/workflows/{workflow_id}", workflows.workflow, name="workflow"),
        Route("/workflows/{workflow_id}/cancel", workflows.confirm_cancel, name="workflow_confirm"),
        Route("/workflows/{workflow_id}/cancel", workflows.cancel, methods=["POST"]),
        Route("/trends", trends.trends, name="trends"),
        Route("/queues", pages.queues, name="queues"),
        Route("/queues/pause", actions.pause, methods=["POST"]),
        Route("/queues/resume", actions.resume, methods=["POST"]),
        Route("/queues/{name:path}/pause", actions.pause, methods=["POST"]),
        Route("/queues/{name:path}/resume", actions.resume, methods=["POST"]),
        Route("/schedules", pages.schedules, name="schedules"),
        Route("/workers", pages.workers, name="workers"),
        Route("/timezone", pages.timezone, name="timezone"),
        Mount("/static", app=StaticFiles(packages=[("akadze.web", "static")]), name="static"),
    ]
    keys = None if read_only else Keys(app)
    web = Starlette(
        routes=routes,
        middleware=[Middleware(DashboardMiddleware, auth=auth, keys=keys)],
        exception_handlers={Exception: _failed},
    )
    web.state.dashboard = Settings(app, read_only, show_args, keys)
    return web


async def _failed(request: Request, exc: Exception) -> Response:
    """A page that could not be served: one line saying why, never a traceback in the page."""
    if sqlstate(exc) == "42P01":
        logger.error(
            "dashboard: the akadze schema is missing or older than this akadze (%s)", request.url.path
        )
        message = "the database's akadze schema is missing or older than this akadze: run `akadze db migrate`"
        return PlainTextResponse(message, status_code=503)
    logger.exception("dashboard: %s %s failed", request.method, request.url.path)
    return PlainTextResponse("the dashboard failed to serve this page; its log says why", status_code=500)
