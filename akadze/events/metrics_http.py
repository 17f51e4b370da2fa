"""The metrics endpoint's HTTP server: bound at once, so a port in use is an error at start,
and answering ``/metrics`` only while its worker serves (503 before that and after it
returns), so a scrape that succeeds means the worker has checked its schema, registered and
takes SIGTERM as a graceful stop. prometheus_client renders the page (``make_wsgi_app``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    from akadze.events.metrics import QueueCollector

#: what a scrape reads while the worker is not serving
NOT_SERVING = b"the worker is not serving yet (starting, or stopped)\n"


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per scrape, none of which holds the process open."""

    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    """No access log line per scrape on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        return None


def start(
    wsgi_app: Callable[..., Iterable[bytes]], host: str, port: int, serving: Callable[[], bool]
) -> tuple[WSGIServer, threading.Thread]:
    """Bind ``host:port`` now and serve ``wsgi_app`` from a daemon thread, answering 503 while
    ``serving()`` is false. Raises OSError when the address cannot be bound."""

    def gated(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not serving():
            start_response(
                "503 Service Unavailable",
                [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", "1")],
            )
            return [NOT_SERVING]
        return wsgi_app(environ, start_response)

    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    server_class: type[_Server] = type("_BoundServer", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(host, port, gated, server_class, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="akadze-metrics", daemon=True)
    thread.start()
    return server, thread


class MetricsServer:
    """What ``serve_worker_metrics`` started: the endpoint's address, and ``close()``."""

    def __init__(
        self, server: Any, thread: threading.Thread, queues: QueueCollector, undo: list[Callable[[], None]]
    ) -> None:
        self.server = server
        self.thread = thread
        self.queues = queues
        self._undo = undo

    @property
    def port(self) -> int:
        """The port the endpoint listens on: the one bound, when ``port=0`` asked for any free port."""
        return int(self.server.server_port)

    def close(self) -> None:
        """Stop serving, wait for the server's thread, and stop counting runs and enqueues (the
        metrics stay registered with what they counted)."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)  # shutdown() has stopped its loop: the thread ends at once
        for undo in self._undo:
            undo()
