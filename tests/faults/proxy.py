"""A small TCP proxy on loopback that can cut or stall the connections through it.

Modes:
- ``pass``: forward both ways.
- ``cut``: reset every open session (RST, SO_LINGER 0) and reset new ones at once.
- ``stall``: keep sessions open but forward nothing either way (a network stall without
  RST); new sessions are accepted and held. Back in ``pass``, held bytes flow again, as after
  a healed partition.
- ``freeze``: the sessions open now stop forever (a half-open connection: no byte and no RST
  ever comes back), while new sessions pass.
- ``drop_replies``: forward client to server, drop what the server sends back (a request
  that is executed, and whose reply is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode = "pass"
        self.port = 0
        self.sessions_total = 0
        #: the client addresses of every session accepted
        self.peers: set[str] = set()
        self.resets = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._sessions: set[_Session] = set()

    async def start(self, host: str = "127.0.0.1") -> int:
        """Listen on ``host`` (loopback, or a namespace's veth address: tests/faults/netns.py)."""
        self._server = await asyncio.start_server(self._accept, host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._flowing.set()
            for session in list(self._sessions):
                session.reset()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def set_mode(self, mode: str) -> None:
        assert mode in ("pass", "cut", "stall", "freeze", "drop_replies"), mode
        self.mode = mode
        if mode == "freeze":
            for session in list(self._sessions):
                session.frozen = True
            mode = self.mode = "pass"
        if mode in ("pass", "drop_replies"):
            self._flowing.set()
        else:
            self._flowing.clear()
        if mode == "cut":
            for session in list(self._sessions):
                session.reset()
                self.resets += 1

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.sessions_total += 1
        self.peers.add(str(writer.get_extra_info("peername")[0]))
        if self.mode == "cut":
            _reset(writer)
            self.resets += 1
            return
        session = _Session(writer)
        self._sessions.add(session)
        try:
            await self._flowing.wait()
            if self.mode == "cut":
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return
            session.upstream = up_writer
            await asyncio.gather(
                self._pump(reader, up_writer, session, reply=False),
                self._pump(up_reader, writer, session, reply=True),
            )
        finally:
            self._sessions.discard(session)
            session.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: _Session, *, reply: bool
    ) -> None:
        try:
            while not session.closed:
                data = await reader.read(65536)
                if not data:
                    break
                await self._flowing.wait()
                if session.closed:
                    break
                if session.frozen or (reply and self.mode == "drop_replies"):
                    continue
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            session.close()


class _Session:
    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.closed = False
        #: frozen sessions swallow every byte, both ways, until closed
        self.frozen = False

    def reset(self) -> None:
        self.closed = True
        _reset(self.client)
        if self.upstream is not None:
            _reset(self.upstream)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.upstream):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN: the peer sees 'connection reset'."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()
