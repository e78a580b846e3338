"""A TCP proxy between a ZooKeeper client and the real server, on the test's event loop, that a
test can cut: `block()` closes every proxied connection and refuses new ones (the client sees its
connection drop and its reconnects fail, while the server and other clients carry on), `unblock()`
lets connections through again. This is how a test makes one client lose its connection (and,
blocked longer than the session timeout, its session) without touching the server."""

from __future__ import annotations

import asyncio
import contextlib


class ZkProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._blocked = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def connect_string(self, chroot: str = "") -> str:
        return f"127.0.0.1:{self.port}{chroot}"

    async def start(self) -> ZkProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.block()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def block(self) -> None:
        self._blocked = True
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    def unblock(self) -> None:
        self._blocked = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._blocked:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst, (writer, up_writer)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            for w in pair:
                self._writers.discard(w)
                with contextlib.suppress(Exception):
                    w.transport.abort()
