"""The worker command's event loop exception handler keeps one known asyncpg leftover (a cancel
request's connection lost during its SSL negotiation, whose future nobody reads) out of the
ERROR log, and leaves every other unhandled exception to asyncio's own handler."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from akadze.cli.worker import quiet_lost_cancel_requests


async def _unread_future_with(exc: BaseException) -> None:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(quiet_lost_cancel_requests)
    future = loop.create_future()
    future.set_exception(exc)
    del future  # never retrieved: asyncio reports it as the future is collected
    gc.collect()


def test_a_lost_cancel_request_connection_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    asyncio.run(_unread_future_with(ConnectionError("unexpected connection_lost() call")))
    assert [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING] == []
    assert [r.levelno for r in caplog.records if r.name == "akadze.worker"] == [logging.DEBUG]


@pytest.mark.parametrize(
    "exc",
    [ConnectionError("connection reset by peer"), RuntimeError("unexpected connection_lost() call")],
    ids=["other-message", "other-type"],
)
def test_any_other_unread_exception_is_still_an_error(
    caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    caplog.set_level(logging.DEBUG)
    asyncio.run(_unread_future_with(exc))
    errors = [r for r in caplog.records if r.name == "asyncio" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "never retrieved" in errors[0].getMessage()
