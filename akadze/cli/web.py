"""``akadze web APP``: serve the dashboard (the web extra) with uvicorn until Ctrl-C.

Before it says where it serves, it checks what would make every page fail: the database
(reachable, and migrated to this akadze's schema) and the address (the host resolves and the
port is free to bind). Each failure is one line and exit 2, as every command says a bad
configuration. The socket it bound is the one uvicorn serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
from collections.abc import Iterator
from typing import Annotated

import typer

from akadze.cli.common import fail, handled, run
from akadze.cli.options import APP_ONLY, LOGS, Logs, Target, expand_options


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to HOST:PORT, or exit 2 with one line saying why it cannot be."""
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        fail(2, f"error: cannot listen on {where}: the host does not resolve ({exc})")
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        fail(2, f"error: cannot listen on {where}: {reason}")
    sock.set_inheritable(True)
    return sock


@handled
@expand_options
def web(
    host: Annotated[
        str, typer.Option(help="Address to bind; 0.0.0.0 exposes it: put auth in front.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    read_only: Annotated[bool, typer.Option("--read-only", help="Show everything, change nothing.")] = False,
    hide_args: Annotated[
        bool, typer.Option("--hide-args", help="Never show a job's arguments or result.")
    ] = False,
    logs: Logs = LOGS,
    target: Target = APP_ONLY,
) -> None:
    """Serve the dashboard of APP (jobs, trends, queues, schedules, workers) at http://HOST:PORT/.

    It has no login of its own: bind it to localhost (the default), or mount
    akadze.web.create_app(app, auth=...) in your own service (docs/dashboard.md). Each action
    is logged (akadze.web); requests are not."""
    logs.start()
    application = target.app("web")
    from akadze.web import create_app

    dashboard = create_app(application, read_only=read_only, show_args=not hide_args)
    try:
        import uvicorn
    except ImportError:
        fail(2, "error: `akadze web` needs the web extra: pip install 'akadze[web]'")
    from akadze.db.status import check_schema

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
        try:
            # the database first: unreachable, missing or unmigrated is one line and exit 2
            await check_schema(application.engine)
            sock = listening_socket(host, port)
            config = uvicorn.Config(
                dashboard, log_config=None, log_level=logs.level.lower(), access_log=False
            )
            shown = host if ":" not in host else f"[{host}]"
            typer.echo(f"akadze dashboard on http://{shown}:{port}/ (Ctrl-C to stop)")
            try:
                await Server(config).serve(sockets=[sock])
            finally:
                sock.close()
        finally:
            await application.dispose()

    run(serve())
