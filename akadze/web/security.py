"""Who may use the dashboard, and how a form proves it came from the dashboard.

- ``auth`` (the caller's callable, sync or async) is asked about every request, before anything
  is read or changed; any answer but ``True`` gets 403 (a truthy ``"no"`` is a no).
- Every response carries ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy: same-origin``, static files and refusals included.
- CSRF: a signed double submit. The token is a random nonce and its HMAC-SHA256 under a key that
  lives in the database (``akadze_web_secret``, made by migration 0013), so every process that
  serves the dashboard from one database accepts the others' tokens, and a token nobody signed
  (say, one planted as a cookie by a sibling domain) is refused. It travels in a cookie
  (HttpOnly, SameSite=Strict, Secure on HTTPS, on the mount path) and in a hidden
  ``csrf_token`` input of every form. A POST is refused (403) when its browser marks it as sent
  from another site (``Sec-Fetch-Site: cross-site`` or ``same-site``), when its ``Origin``
  header is present and names a host other than the request's ``Host`` (or
  ``X-Forwarded-Host``), and when its field and cookie are missing, differ, or are not a token
  this dashboard's key signed. ``Sec-Fetch-Site: none`` (typed by the user) and a missing
  header (older browsers, scripts) pass that first check.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import inspect
import logging
import re
import secrets
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.web import Auth

logger = logging.getLogger("akadze.web")

#: the cookie and the form field that carry the CSRF token
CSRF_COOKIE = "akadze_csrf"
CSRF_FIELD = "csrf_token"
#: a token: 43 characters of nonce, a dot, 43 characters of signature (both base64url)
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{43}")

#: what every response of the dashboard carries
COMMON_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


class Keys:
    """The dashboard's CSRF key, read once from the database (``Queries.web_secret``) and kept."""

    def __init__(self, app: Akadze) -> None:
        self._app = app
        self._key: bytes | None = None
        self._lock = asyncio.Lock()

    async def load(self) -> bytes:
        """The key, read from the database at first use (made there when missing) and kept; under a
        lock, so concurrent first requests read it once. RuntimeError when it cannot be made."""
        if self._key is None:
            async with self._lock:
                if self._key is None:
                    from akadze.db.queries import Queries

                    async with self._app.engine.connect() as conn:
                        secret = await Queries.web_secret(conn)
                    if secret is None:
                        async with self._app.engine.begin() as conn:
                            await Queries.make_web_secret(conn)
                        async with self._app.engine.connect() as conn:
                            secret = await Queries.web_secret(conn)
                    if secret is None:
                        raise RuntimeError("the dashboard's CSRF key could not be made (akadze_web_secret)")
                    self._key = secret.encode()
        return self._key

    @property
    def key(self) -> bytes:
        """The key; DashboardMiddleware loads it before any handler of a dashboard with forms."""
        if self._key is None:
            raise RuntimeError("the dashboard's CSRF key is not loaded yet")
        return self._key


class DashboardMiddleware:
    """Asks ``auth`` about every HTTP request (a refused one gets 403 and goes no further), loads
    the CSRF key when the dashboard has forms, and adds COMMON_HEADERS to every response."""

    def __init__(self, app: ASGIApp, auth: Auth | None, keys: Keys | None) -> None:
        self.app = app
        self.auth = auth
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in COMMON_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        if self.auth is not None and not await _allowed(self.auth, Request(scope, receive)):
            await PlainTextResponse("forbidden", status_code=403)(scope, receive, with_headers)
            return
        if self.keys is not None:
            await self.keys.load()
        await self.app(scope, receive, with_headers)


async def _allowed(auth: Auth, request: Request) -> bool:
    answer: object = auth(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is True:
        return True
    if answer is not False:
        # a truthy "no" must not open the dashboard: only True does
        logger.warning("dashboard auth returned %s, not True or False: refused", type(answer).__name__)
    return False


def _sign(key: bytes, nonce: str) -> str:
    digest = hmac.new(key, nonce.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def new_token(key: bytes) -> str:
    """A fresh token: a random nonce and its signature under ``key``."""
    nonce = secrets.token_urlsafe(32)
    return f"{nonce}.{_sign(key, nonce)}"


def valid_token(key: bytes, token: str | None) -> bool:
    """Whether ``token`` has the issuer's exact shape and ``key`` signed it."""
    if token is None or not _TOKEN.fullmatch(token):
        return False
    nonce, signature = token.split(".")
    return hmac.compare_digest(signature, _sign(key, nonce))


def csrf_token(request: Request, key: bytes) -> tuple[str, bool]:
    """The request's token, and whether it is new (then the response must set the cookie)."""
    token = request.cookies.get(CSRF_COOKIE)
    if token is not None and valid_token(key, token):
        return token, False
    return new_token(key), True


def cookie_path(request: Request) -> str:
    """The path the dashboard's cookies are scoped to: its mount prefix ("/" at the root), so a
    browser sends them to the dashboard's pages only, not to the rest of the app that mounts it."""
    return request.scope.get("root_path", "") or "/"


def _host_and_port(netloc: str) -> tuple[str, str | None]:
    """A Host header's or an origin's host name in lower case, and its port when spelled."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):  # an IPv6 literal
        host, _, rest = netloc.partition("]")
        return host + "]", rest.removeprefix(":") or None
    host, _, port = netloc.partition(":")
    return host, port or None


def _origin_refusal(request: Request) -> str | None:
    """Why the Origin header shows a POST from elsewhere, or None (no Origin, or ours).

    The host names must be equal, and so must the ports when Origin names one: a proxy that ends
    TLS leaves ``https://host`` in Origin and ``host`` (or ``host:8000``) in Host."""
    origin = request.headers.get("origin")
    if origin is None:
        return None
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "the form came from an origin that is not this dashboard's"
    host, port = _host_and_port(parts.netloc)
    for own in (request.headers.get("host"), request.headers.get("x-forwarded-host")):
        if own:
            own_host, own_port = _host_and_port(own.split(",")[0])
            if own_host == host and (port is None or own_port == port):
                return None
    return "the form came from another site (its Origin is not this dashboard's host)"


def csrf_refusal(request: Request, submitted: str | None, key: bytes) -> str | None:
    """Why a POST is refused, or None when it comes from this dashboard (the module's doc)."""
    if request.headers.get("sec-fetch-site", "none") not in ("same-origin", "none"):
        return "the form came from another site"
    refusal = _origin_refusal(request)
    if refusal is not None:
        return refusal
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted:
        return "the form carries no CSRF token: reload the page and try again"
    if not hmac.compare_digest(cookie.encode(), submitted.encode()) or not valid_token(key, cookie):
        return "the form's CSRF token is not valid: reload the page and try again"
    return None
