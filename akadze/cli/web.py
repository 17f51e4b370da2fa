"""``akadze web APP``: serve the dashboard (the web extra) with uvicorn until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Annotated

import typer

from akadze.cli.common import AppArgument, AppOption, app_for, fail, handled, run


@handled
def web(
    app_path: AppArgument = None,
    host: Annotated[
        str, typer.Option(help="Address to bind; 0.0.0.0 exposes it: put auth in front.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    read_only: Annotated[bool, typer.Option("--read-only", help="Show everything, change nothing.")] = False,
    hide_args: Annotated[
        bool, typer.Option("--hide-args", help="Never show a job's arguments or result.")
    ] = False,
    app_option: AppOption = None,
) -> None:
    """Serve the dashboard of APP (jobs, queues, schedules, workers) at http://HOST:PORT/.

    It has no login of its own: bind it to localhost (the default), or mount
    akadze.web.create_app(app, auth=...) in your own service (docs/dashboard.md)."""
    from akadze.web import create_app

    application = app_for(app_path, app_option, "web")
    dashboard = create_app(application, read_only=read_only, show_args=not hide_args)
    try:
        import uvicorn
    except ImportError:
        fail(2, "error: `akadze web` needs the web extra: pip install 'akadze[web]'")

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # a graceful stop (SIGTERM, Ctrl-C) exits 0, as `akadze worker` does; uvicorn's own
            # handling raises the signal again once it has stopped
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.handle_exit, sig, None)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    async def serve() -> None:
        server = Server(uvicorn.Config(dashboard, host=host, port=port, log_level="info"))
        try:
            await server.serve()
        finally:
            await application.dispose()

    typer.echo(f"akadze dashboard on http://{host}:{port}/ (Ctrl-C to stop)")
    run(serve())
