"""The operator's dashboard, an ASGI application (``pip install 'akadze[web]'``).

``create_app(app)`` returns it; mount it under any path of a Starlette or FastAPI app, or serve
it with ``akadze web APP``. Starlette and Jinja2 are imported when it is created, never when
akadze (or its worker) is imported. docs/dashboard.md says what each page shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

from akadze.errors import ConfigError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp

    from akadze.app import Akadze

#: decides whether a request may proceed: sync or async, True to let it through
Auth: TypeAlias = "Callable[[Request], bool | Awaitable[bool]]"

__all__ = ["Auth", "create_app"]


def create_app(
    app: Akadze,
    *,
    auth: Auth | None = None,
    read_only: bool = False,
    show_args: bool = True,
) -> ASGIApp:
    """The dashboard of ``app`` as an ASGI application.

    Args:
        app: the application whose jobs, queues, schedules and workers it shows (its engine
            is used, never disposed here).
        auth: called with every request (sync or async); a false answer gets 403 and changes
            nothing. None lets every request through: put the dashboard behind your own auth.
        read_only: show everything, render no form, and refuse every action (403).
        show_args: False never shows a job's arguments or result, even on request.

    Example::

        from fastapi import FastAPI
        api = FastAPI()
        api.mount("/akadze", create_app(app, auth=lambda request: is_admin(request)))
    """
    from akadze.app import Akadze

    if not isinstance(app, Akadze):
        raise ConfigError(f"create_app needs an Akadze app, got {type(app).__qualname__}")
    if auth is not None and not callable(auth):
        raise ConfigError(f"auth must be a callable taking the request, got {auth!r}")
    for label, value in (("read_only", read_only), ("show_args", show_args)):
        if not isinstance(value, bool):
            raise ConfigError(f"{label} must be True or False, got {value!r}")
    try:
        from akadze.web.application import build
    except ImportError as exc:
        raise ConfigError(
            f"the dashboard needs the web extra ({exc.name} is missing): pip install 'akadze[web]'"
        ) from None
    return build(app, auth=auth, read_only=read_only, show_args=show_args)
