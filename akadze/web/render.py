"""Templates (package data, autoescaped: every name, message and argument a job or a user
controls is escaped), the filters they use, and the time zone pages are shown in.

Times are shown in the zone of the ``akadze_tz`` cookie (an IANA name; UTC without it), which
the header's choice sets (``/timezone``); each time is a ``<time>`` element whose ``datetime``
is UTC, with how long ago it was beside it where that helps (the last day).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jinja2
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from akadze.web.security import CSRF_COOKIE, cookie_path, csrf_token

#: the cookie that holds the chosen time zone
TZ_COOKIE = "akadze_tz"
#: a time this recent gets "… ago" beside it
RELATIVE_WITHIN_S = 86_400


def zone(name: str | None) -> tzinfo | None:
    """The IANA zone ``name``, or None when there is no such zone (UTC is ``UTC``)."""
    if not name or len(name) > 64 or not all(c.isalnum() or c in "/_+-" for c in name):
        return None
    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def zone_of(request: Request) -> tuple[str, tzinfo]:
    """The request's chosen zone (its cookie), UTC by default."""
    name = request.cookies.get(TZ_COOKIE)
    found = zone(name)
    return (name, found) if name and found is not None else ("UTC", UTC)


def _moment(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def ago(seconds: float) -> str:
    """How long ago (or, negative, how far ahead), in words: 42 s ago, in 3 min."""
    text = duration(abs(seconds))
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def local_text(moment: datetime, where: tzinfo) -> str:
    """A moment as the page shows it: to the second, in the zone, its abbreviation after."""
    shown = moment.astimezone(where)
    if where is UTC:
        return shown.strftime("%Y-%m-%d %H:%M:%SZ")
    return shown.strftime("%Y-%m-%d %H:%M:%S ") + (shown.tzname() or "")


@jinja2.pass_context
def when(
    context: jinja2.runtime.Context, value: datetime | str | None, relative: bool = False
) -> Markup | str:
    """A ``<time>`` in the page's zone; with ``relative``, how long ago beside it (the last day)."""
    moment = _moment(value)
    if moment is None:
        return "-" if value is None else str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    iso = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    html = Markup('<time datetime="{}">{}</time>').format(iso, local_text(moment, context["tz"]))
    now: datetime = context["now"]
    age = (now - moment).total_seconds()
    if relative and abs(age) < RELATIVE_WITHIN_S:
        html += Markup(' <span class="rel">{}</span>').format(ago(age))
    return html


def duration(value: float | None) -> str:
    """A duration in seconds, short: 42 s, 3 min, 2.5 h."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    if value < 172_800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86_400:.0f} d"


def segment(value: object) -> str:
    """One path segment (a queue name may hold '/', '?' or '#')."""
    return quote(str(value), safe="")


def query(**params: object) -> str:
    """A query string of the non-empty parameters, with its '?' (empty when none is left)."""
    kept = {name: value for name, value in params.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


@cache
def environment() -> jinja2.Environment:
    """The Jinja environment of every page (built once): the package's templates, autoescaped,
    undefined names an error, with the filters and globals the templates use."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("akadze.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, seconds=duration, segment=segment)
    env.globals.update(query=query, escape=escape)
    return env


#: the policy of every page: only the dashboard's own script and stylesheet
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The page (or, with ``?fragment=live``, its live part), with what every template uses: the
    mount prefix, the CSRF token, the mode, the zone and the clock."""
    settings = request.app.state.dashboard
    token, new = csrf_token(request, settings.keys.key) if settings.keys is not None else ("", False)
    zone_name, where = zone_of(request)
    context.setdefault("now", datetime.now(UTC))
    html = (
        environment()
        .get_template(template)
        .render(
            base=request.scope.get("root_path", ""),
            live_url=request.url.path + query(**{**request.query_params, "done": "", "fragment": "live"}),
            csrf=token,
            read_only=settings.read_only,
            show_args=settings.show_args,
            page=template.removesuffix(".html"),
            fragment=request.query_params.get("fragment") == "live",
            tz=where,
            tz_name=zone_name,
            **context,
        )
    )
    response = HTMLResponse(html, status_code=status_code)
    response.headers["cache-control"] = "no-store"
    response.headers["content-security-policy"] = CSP
    if new:
        response.set_cookie(
            CSRF_COOKIE,
            token,
            path=cookie_path(request),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    return response
