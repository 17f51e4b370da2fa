"""SIGTERM and SIGINT as a worker's graceful stop, and the handlers that were there before put
back when the worker returns. Only the main thread can take signals: elsewhere nothing is
installed (a worker run in a thread is stopped with ``worker.stop()``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from typing import Any

#: what install() replaced: (signal, the previous handler), for restore()
Installed = list[tuple[int, Any]]


def install(loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]) -> Installed:
    """Call ``on_signal(signum)`` on the loop at SIGTERM and SIGINT."""
    if threading.current_thread() is not threading.main_thread():
        return []
    installed: Installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous = signal.getsignal(sig)
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append((sig, previous))
    return installed


def restore(loop: asyncio.AbstractEventLoop, installed: Installed) -> None:
    """Undo install(): the loop's handlers go and the previous ones come back, as far as the loop
    allows."""
    for sig, previous in installed:
        # a loop already closing may refuse to remove its handler; the previous one comes
        # back all the same
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
        if previous is not None:
            with contextlib.suppress(Exception):
                signal.signal(sig, previous)
