"""Templates (package data, autoescaped: every name, message and argument a job or a user
controls is escaped) and the filters they use."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from akadze.web.security import CSRF_COOKIE, cookie_path, csrf_token


def when(moment: datetime | str | None) -> str:
    """A timestamp in UTC, to the second."""
    if moment is None:
        return "-"
    try:
        parsed = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    except ValueError:
        return str(moment)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def seconds(value: float | None) -> str:
    """A duration in seconds, short: 42 s, 3 min, 2.5 h."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def segment(value: object) -> str:
    """One path segment (a queue name may hold '/', '?' or '#')."""
    return quote(str(value), safe="")


def query(**params: object) -> str:
    """A query string of the non-empty parameters, with its '?' (empty when none is left)."""
    kept = {name: value for name, value in params.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("akadze.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, seconds=seconds, segment=segment)
    env.globals.update(query=query)
    return env


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The page, with what every template uses: the mount prefix, the CSRF token, the mode."""
    settings = request.app.state.dashboard
    token, new = csrf_token(request)
    html = (
        environment()
        .get_template(template)
        .render(
            base=request.scope.get("root_path", ""),
            csrf=token,
            read_only=settings.read_only,
            show_args=settings.show_args,
            page=template.removesuffix(".html"),
            **context,
        )
    )
    response = HTMLResponse(html, status_code=status_code)
    response.headers["cache-control"] = "no-store"
    response.headers["x-frame-options"] = "DENY"
    response.headers["referrer-policy"] = "same-origin"
    response.headers["content-security-policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'"
    )
    if new:
        response.set_cookie(CSRF_COOKIE, token, path=cookie_path(request), httponly=True, samesite="strict")
    return response
