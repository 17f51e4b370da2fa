"""Who may use the dashboard and how a form proves it came from the dashboard.

- ``auth`` (the caller's callable, sync or async) is asked about every request, before
  anything is read or changed; a false answer gets 403.
- CSRF: double submit. A random token lives in a cookie (HttpOnly, SameSite=Strict, on the
  mount path) and in a hidden ``csrf_token`` input of every form; a POST whose field does not
  match its cookie gets 403, and so does one a browser marks as sent from another site
  (``Sec-Fetch-Site`` other than same-origin). The token is not
  tied to a server secret, so any number of processes serve the same dashboard.
"""

from __future__ import annotations

import hmac
import inspect
import secrets
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from akadze.web import Auth

#: the cookie and the form field that carry the CSRF token
CSRF_COOKIE = "akadze_csrf"
CSRF_FIELD = "csrf_token"


class AuthMiddleware:
    """Asks ``auth`` about every HTTP request; a refused one is answered 403 and goes no further."""

    def __init__(self, app: ASGIApp, auth: Auth | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.auth is not None:
            allowed = self.auth(Request(scope, receive))
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                await PlainTextResponse("forbidden", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def csrf_token(request: Request) -> tuple[str, bool]:
    """The request's token, and whether it is new (then the response must set the cookie)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if len(token) >= 32 and token.isascii():
        return token, False
    return secrets.token_urlsafe(32), True


def cookie_path(request: Request) -> str:
    return request.scope.get("root_path", "") or "/"


def csrf_refusal(request: Request, submitted: str | None) -> str | None:
    """Why a POST is refused, or None when its token matches its cookie and its origin is ours."""
    # Browsers say where a request comes from; the dashboard's own forms are same-origin. (The
    # Origin header is not compared with Host: a proxy in front may rewrite Host.)
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "the form came from another site"
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted:
        return "the form carries no CSRF token: reload the page and try again"
    if not hmac.compare_digest(cookie.encode(), submitted.encode()):
        return "the form's CSRF token does not match: reload the page and try again"
    return None
