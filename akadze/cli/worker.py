"""``akadze worker APP``: run a worker from the command line."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from akadze.cli.common import fail, handled, run, warn
from akadze.cli.options import LOGS, Logs, Target, expand_options

if TYPE_CHECKING:
    from akadze.app import Akadze


def quiet_lost_cancel_requests(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The worker's event loop exception handler: as asyncio's, but for one known asyncpg
    leftover. A query cancelled as the worker stops (a background service's) makes asyncpg open
    a connection to send PostgreSQL its cancel request; when that connection is lost during its
    SSL negotiation, asyncpg leaves the future of the negotiation with an exception nobody reads
    (MagicStack/asyncpg#1211, #1310), which asyncio logged at ERROR as "Future exception was
    never retrieved" after the worker had stopped. Nothing is lost: logged at DEBUG instead."""
    exc = context.get("exception")
    if (
        context.get("message") == "Future exception was never retrieved"
        and type(exc) is ConnectionError
        and str(exc) == "unexpected connection_lost() call"
    ):
        logging.getLogger("akadze.worker").debug("a cancel request's connection was lost: %s", exc)
        return
    loop.default_exception_handler(context)


#: APP or --app, and the --database-url of an app that reads AKADZE_DATABASE_URL (app_for)
APP_AND_URL = Target.options(
    url="The database of an app built with Akadze() alone (or AKADZE_DATABASE_URL); "
    "an app built with its own URL or engine is refused with it."
)


@handled
@expand_options
def worker(
    target: Target = APP_AND_URL,
    queue: Annotated[
        list[str] | None, typer.Option("-q", "--queue", help="A queue to serve (repeatable).")
    ] = None,
    slots: Annotated[int, typer.Option(min=1, help="Jobs run at once.")] = 10,
    db_slots: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Runs holding a connection in complete_tx() at once (default: every slot); "
            "the pool then needs 3 + this many (docs/install.md).",
        ),
    ] = None,
    burst: Annotated[bool, typer.Option(help="Exit 0 once no ready job is left.")] = False,
    shutdown_timeout: Annotated[
        float, typer.Option(min=0, help="Seconds running jobs get to finish on a graceful stop.")
    ] = 30.0,
    poll_interval: Annotated[float, typer.Option(min=0.01, help="Seconds between polls.")] = 1.0,
    lost_after: Annotated[
        float,
        typer.Option(min=0.3, help="Seconds without heartbeat before a worker counts as lost."),
    ] = 30.0,
    cancel_grace: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds a running job may go on after its cancel request is seen; then the "
            "worker stops it and it ends cancelled (default: never; docs/outcomes.md).",
        ),
    ] = None,
    logs: Logs = LOGS,
    log_tracebacks: Annotated[
        bool, typer.Option(help="Log a failed run's traceback even above DEBUG.")
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            envvar="AKADZE_METRICS_PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (needs akadze[prometheus]).",
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(envvar="AKADZE_METRICS_HOST", help="The address the metrics endpoint binds.")
    ] = "127.0.0.1",
) -> None:
    """Run a worker (all queues of the app's tasks when no -q)."""
    from akadze.worker import Worker

    logs.start(tracebacks=log_tracebacks)
    queues = _queues(queue)
    application = target.app("worker")
    if queues:
        _warn_unused(application, queues)

    async def serve() -> int:
        asyncio.get_running_loop().set_exception_handler(quiet_lost_cancel_requests)
        try:
            w = Worker(
                application,
                queues=queues or None,
                slots=slots,
                db_slots=db_slots,
                shutdown_timeout=timedelta(seconds=shutdown_timeout),
                poll_interval=timedelta(seconds=poll_interval),
                lost_after=timedelta(seconds=lost_after),
                heartbeat_interval=timedelta(seconds=min(5.0, lost_after / 4)),
                cancel_grace=timedelta(seconds=cancel_grace) if cancel_grace is not None else None,
            )
            if metrics_port is not None:
                from akadze.events.metrics import serve_worker_metrics

                serve_worker_metrics(w, port=metrics_port, host=metrics_host)
            return await w.run(burst=burst)
        finally:
            # closing a pooled connection that went silent (half-open) waits for a reply
            # that never comes: the worker has stopped, so do not wait for good
            try:
                await asyncio.wait_for(application.dispose(), timeout=10)
            except TimeoutError:
                logging.getLogger("akadze.worker").warning(
                    "closing the database connections took over 10s; exiting without waiting"
                )

    try:
        run(serve())
    except ValueError as exc:
        fail(2, f"error: {exc}")


def _queues(given: list[str] | None) -> list[str]:
    """The -q values; an empty or blank name is a usage error, not a queue nobody can enqueue to."""
    queues = list(given or [])
    if any(not name.strip() for name in queues):
        fail(2, "error: -q needs a queue name, got an empty one (omit -q to serve every queue of the app)")
    return queues


def _warn_unused(application: Akadze, queues: list[str]) -> None:
    """Say which -q queues no task of the app uses: usually a typo. They are still served, since
    a job can be put in any queue (``using(queue=...)``, or another producer)."""
    known = set(application.queues())
    unused = [name for name in queues if name not in known]
    if unused:
        warn(
            f"no task of the app uses queue(s) {', '.join(map(repr, unused))} "
            f"(the app's tasks use: {', '.join(sorted(known)) or 'none'}); serving them anyway"
        )
