"""Fixtures of the dashboard's tests: an app with tasks, a schedule and hostile names, and an
HTTP client on the dashboard (httpx over ASGI: no server, the real database)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from akadze import Akadze
from akadze.web import create_app

#: a string a hostile producer or task could put in any name, message or argument
HOSTILE = "<script>alert('x')</script>\"'&"

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def build_app(make_app: Callable[..., Akadze]) -> Akadze:
    app = make_app()

    @app.task("mail.send", queue="mail")
    async def send(to: str, body: str = "") -> None: ...

    @app.task("report.build", queue="reports", max_attempts=1)
    async def build(n: int) -> int:
        raise RuntimeError(f"report {n} failed: {HOSTILE}")

    @app.task(f"hostile.{HOSTILE}", queue=f"q-{HOSTILE}")
    async def hostile(note: str) -> None: ...

    app.schedule("nightly", build, cron="0 3 * * *", args={"n": 1})
    app.schedule(f"every-{HOSTILE}", hostile, every=timedelta(minutes=15), args={"note": HOSTILE})
    return app


@pytest.fixture
async def akadze_app(make_app: Callable[..., Akadze]) -> Akadze:
    return build_app(make_app)


def client_for(asgi: Any, base_url: str = "http://dash.test") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url=base_url)


@pytest.fixture
async def client(akadze_app: Akadze) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_app(akadze_app)) as c:
        yield c


async def token(client: httpx.AsyncClient, path: str = "/queues") -> str:
    """The CSRF token of a page's forms (the GET also sets its cookie in the client)."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    found = _TOKEN.search(page.text)
    if found is None:
        raise AssertionError(f"no CSRF field on {path}")
    return found[1]
