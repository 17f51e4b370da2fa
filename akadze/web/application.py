"""The Starlette application: routes, the auth middleware, static files from the package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import akadze.web.actions as actions
import akadze.web.pages as pages
from akadze.web.security import AuthMiddleware

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.web import Auth


@dataclass(frozen=True, slots=True)
class Settings:
    """What every handler reads from ``request.app.state.dashboard``."""

    app: Akadze
    read_only: bool
    show_args: bool


def build(app: Akadze, *, auth: Auth | None, read_only: bool, show_args: bool) -> Starlette:
    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/jobs/bulk", pages.bulk, name="bulk"),
        Route("/jobs/bulk", actions.bulk, methods=["POST"], name="bulk_action"),
        Route("/jobs/{job_id:int}", pages.job, name="job"),
        Route("/jobs/{job_id:int}/cancel", actions.cancel, methods=["POST"]),
        Route("/jobs/{job_id:int}/requeue", actions.requeue, methods=["POST"]),
        Route("/jobs/{job_id:int}/run-now", actions.run_now, methods=["POST"]),
        Route("/queues", pages.queues, name="queues"),
        Route("/queues/{name:path}/pause", actions.pause, methods=["POST"]),
        Route("/queues/{name:path}/resume", actions.resume, methods=["POST"]),
        Route("/schedules", pages.schedules, name="schedules"),
        Route("/workers", pages.workers, name="workers"),
        Mount("/static", app=StaticFiles(packages=[("akadze.web", "static")]), name="static"),
    ]
    web = Starlette(routes=routes, middleware=[Middleware(AuthMiddleware, auth=auth)])
    web.state.dashboard = Settings(app, read_only, show_args)
    return web
