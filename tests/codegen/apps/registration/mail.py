"""Cases 1-8 and 13 in one included module."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from akadze import Akadze

from . import extras
from .helpers import Greeter, Mailer, greet, make_sender, notify

P = ParamSpec("P")
R = TypeVar("R")


def logged(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A decorator that keeps the signature (functools.wraps): case 2."""

    @functools.wraps(fn)
    async def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        return await fn(*args, **kwargs)

    return inner


def register(app: Akadze) -> None:
    # case 1: async def here, plain def in billing; case 13: parameters named like options,
    # like the generated code's imports, and like builtins
    @app.task("mail.send", queue="mail", max_attempts=5, priority=3)
    async def send(
        self: int,
        kwargs: str,
        session: str,
        delay: float,
        queue: str,
        priority: int,
        typing: bool,
        list: Any,
        _rt: int = 0,
    ) -> None:
        """Send one mail."""

    # case 2: stacked decorators with functools.wraps
    @app.task("mail.send-later", queue="mail")
    @logged
    async def send_later(user_id: int, when: str) -> None:
        return None

    # case 3: a function from another module; case 7: the same function twice
    app.register(notify, name="mail.notify", queue="mail")
    app.register(notify, name="mail.notify_urgent", queue="urgent", priority=10)
    # case 4: a factory in a loop
    for lang in ("de", "en"):
        app.register(make_sender(lang), name=f"mail.welcome.{lang}", queue="mail")
    # case 6: a bound method
    app.register(Mailer("noreply").bounce, name="mail.bounce", queue="mail")
    # case 5: functools.partial, bound by position and by keyword; neither bound argument is
    # the producer's to pass
    app.register(functools.partial(greet, "acme"), name="mail.greet.positional", queue="mail")
    app.register(
        functools.partial(greet, tenant="globex", loud=True), name="mail.greet.keyword", queue="mail"
    )
    # case 6: a callable instance (async def __call__)
    app.register(Greeter("initech"), name="mail.greet.instance", queue="mail")
    # case 8: nested registration
    extras.register_more(app)

    unused: dict[str, Any] = {}
    del unused
