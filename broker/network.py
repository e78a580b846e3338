"""The wire side of the broker: listeners and connections.

Why this shape (uvicorn's protocol classes, kfake's client_conn): a connection is an
`asyncio.Protocol` that cuts 4-byte size-prefixed frames out of the byte stream, decodes the
request header, and hands the request to its handler as a task, so a produce waiting for acks=all
does not hold up a pipelined fetch. Responses still leave in request order — Kafka guarantees it
and clients match responses by position as well as correlation id — so finished responses wait
in a queue until every earlier one is written. An acks=0 produce takes a place in that queue and
writes nothing.

Flow control: reading pauses while the transport's write buffer is above its high-water mark
(the client is not reading responses) or too many requests are in flight, and resumes when both
clear. Malformed frames — a size prefix out of bounds, an undecodable header, an unknown API —
are logged and the connection is closed; the broker itself never goes down on client input.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

import structlog

from broker.apis.registry import REGISTRY
from broker.context import RequestContext
from protocol.framing import (
    API_VERSIONS_KEY,
    decode_request_header,
    encode_response_frame,
)
from protocol.messages import REQUESTS, ApiVersionsResponse
from protocol.primitives import DecodeError, UnsupportedVersionError

if TYPE_CHECKING:
    from broker.config import Listener
    from broker.server import BrokerServer

log = structlog.get_logger("odradek.network")

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 64
UNSUPPORTED_VERSION = 35


class KafkaConnection(asyncio.Protocol):
    """One client connection. Lives on the event loop; no locking needed."""

    def __init__(self, server: BrokerServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.max_request = server.config["socket.request.max.bytes"]
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.peer = "?"
        self.closed = False
        self.write_paused = False
        self.read_paused = False
        self.last_active = time.monotonic()

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # as Kafka's SocketServer: a response's last segment must not wait for a delayed ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for fut in self.pending:
            fut.cancel()
        self.pending.clear()

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        buf = self.buffer
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_request:
                self.abort(
                    "request size out of bounds",
                    size=size,
                    max_size=self.max_request,
                )
                return
            if end - pos - 4 < size:
                break
            frame = buf[pos + 4 : pos + 4 + size]  # a private, writable copy: produce rewrites offsets in place
            pos += 4 + size
            self._dispatch(frame)
            if self.closed:
                return
        if pos:
            del buf[:pos]

    def eof_received(self) -> bool | None:
        return None  # close when the client half-closes

    # -- requests ---------------------------------------------------------------------------

    def _dispatch(self, frame: bytearray) -> None:
        try:
            header, pos = decode_request_header(frame)
        except DecodeError as e:
            self.abort("malformed request header", error=str(e), size=len(frame))
            return
        key, version = header.request_api_key, header.request_api_version
        handler = REGISTRY.get(key)
        if handler is None or key not in REQUESTS:
            self.abort("request for an unsupported api key", api_key=key, api_version=version)
            return
        ctx = RequestContext(self.server, self, header)
        if not handler.supports(version):
            if key == API_VERSIONS_KEY:
                # answered in the v0 layout so an old or new client can still negotiate
                body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=ctx.api_version_keys())
                self._enqueue_ready(encode_response_frame(header.correlation_id, key, 0, body))
                return
            self.abort("unsupported request version", api_key=key, api_version=version)
            return
        try:
            request = REQUESTS[key].decode(frame, version, pos)
        except UnsupportedVersionError:
            self.abort("unsupported request version", api_key=key, api_version=version)
            return
        except DecodeError as e:
            self.abort("malformed request body", api_key=key, api_version=version, error=str(e))
            return
        task = asyncio.ensure_future(self._process(ctx, handler.handle, request))
        self.pending.append(task)
        task.add_done_callback(self._on_done)
        self._update_reading()

    async def _process(self, ctx: RequestContext, handle: Any, request: Any) -> list[Any] | None:
        response = await handle(ctx, request)
        if response is None:
            return None
        h = ctx.header
        return encode_response_frame(h.correlation_id, h.request_api_key, h.request_api_version, response)

    def _enqueue_ready(self, chunks: list[Any]) -> None:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(chunks)
        self.pending.append(fut)
        self._on_done(fut)

    def _on_done(self, _: asyncio.Future[Any]) -> None:
        """Write every finished response at the head of the queue, in request order."""
        pending = self.pending
        while pending and pending[0].done():
            fut = pending.popleft()
            if fut.cancelled() or self.closed:
                continue
            exc = fut.exception()
            if exc is not None:
                log.error("request handler failed; closing connection", peer=self.peer, exc_info=exc)
                self.close()
                return
            chunks = fut.result()
            if chunks and self.transport is not None:
                self.transport.writelines(chunks)
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = self.write_paused or len(self.pending) >= MAX_IN_FLIGHT
        if should_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not should_pause and self.read_paused:
            self.transport.resume_reading()
            self.read_paused = False

    # -- closing ----------------------------------------------------------------------------

    def abort(self, reason: str, **details: Any) -> None:
        """Log why and drop the connection (bad client input)."""
        log.warning(reason + "; closing connection", peer=self.peer, listener=self.listener.name, **details)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def idle_seconds(self) -> float:
        return 0.0 if self.pending else time.monotonic() - self.last_active
