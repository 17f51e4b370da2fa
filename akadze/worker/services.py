"""The worker's services (rescuer, scheduler, pruner, cancels, listener): each a loop of its
own beside the fetcher, started with the worker and cancelled at its stop.

A service that fails is logged and stays stopped; the worker goes on serving. At the stop a
service that does not end when cancelled (a library that caught the CancelledError) is
cancelled again, then named in a warning and left behind: a stop always ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akadze.worker import Worker

logger = logging.getLogger("akadze.worker")

#: a maintenance service: runs beside the fetch loop until cancelled
Service = Callable[["Worker"], Awaitable[None]]

#: a cancelled service gets this long to end, and is cancelled again up to this many times
_CANCEL_WAIT_S = 2.0
_CANCEL_ROUNDS = 3


def start_service(service: Service, worker: Worker) -> asyncio.Task[None]:
    """Run ``service(worker)`` as the task ``akadze-<its name>``; an exception it raises is logged
    and ends that service alone."""
    name = getattr(service, "__name__", type(service).__name__)
    return start_task(service(worker), name)


def start_task(coro: Awaitable[None], name: str) -> asyncio.Task[None]:
    """Run ``coro`` as the task ``akadze-<name>`` on the running loop (the listener): an
    exception it lets out is logged and ends that task alone, as a service's does."""
    return asyncio.get_running_loop().create_task(_guard(coro, name), name=f"akadze-{name}")


async def _guard(service: Awaitable[None], name: str) -> None:
    try:
        await service
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("worker service %s stopped", name)


async def cancel_services(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the services and wait until they end, within bounds (the module's doc)."""
    pending = set(tasks)
    for _ in range(_CANCEL_ROUNDS):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=_CANCEL_WAIT_S)
    if pending:
        logger.warning(
            "worker services did not stop when cancelled: %s; exiting without them",
            ", ".join(sorted(task.get_name() for task in pending)),
        )
