"""The wire side of the broker: listeners and connections.

Why this shape (uvicorn's protocol classes, kfake's client_conn): a connection is an
`asyncio.Protocol` that cuts 4-byte size-prefixed frames out of the byte stream, decodes the
request header, and hands the request to its handler as a task, so a produce waiting for acks=all
does not hold up a pipelined fetch. Produce and Fetch, the replication round's critical path, run
without a task: started in the read callback and resumed inside the purgatory call that
completes what they wait for (_Driven). Responses still leave in request order — Kafka guarantees it
and clients match responses by position as well as correlation id — so finished responses wait
in a queue until every earlier one is written. An acks=0 produce takes a place in that queue and
writes nothing.

Flow control (Kafka mutes a channel): reading pauses while the transport's write buffer is above
its high-water mark (the client is not reading responses), while too many requests are in
flight, while the finished but unsent responses exceed `queued.max.response.bytes`, or while the
request memory pool (`queued.max.request.bytes`, broker.memory_pool) cannot hold the request
being received; it resumes when all of them clear.

Fetch responses are streamed from the files: the record bytes of a partition stay a file region
(storage's FileRecords) inside the encoded response, and the connection sends them with
`os.sendfile` straight from the segment file to the socket (zero copy) whenever the transport's
own buffer is empty — which keeps the bytes in request order, as nothing else is queued ahead of
them. When the socket is full the rest goes as bounded `pread` chunks through the transport,
whose write-buffer limits (low-water mark 0) tell us when it is empty again. So a client that
never reads costs the broker at most one chunk plus the transport's buffer, however much it asked.

TLS connections (SSL listeners) cannot use sendfile: the bytes must be encrypted by the
transport. Their file regions are read in bounded chunks (STREAM_CHUNK) by `os.pread` in the
default executor -- a cold segment must not stall the loop -- and each chunk is written through
the TLS transport when it arrives, the next read starting once the transport drained below its
high-water mark; the region stays at the head of the outgoing queue meanwhile, so responses still
leave in order. The connection's principal (`principal`: `User:ANONYMOUS`, or the mapped subject
of a TLS client certificate, broker.tls.principal) is fixed once the handshake is done.

Malformed frames — a size prefix out of bounds, an undecodable header, an unknown API — are
logged (rate limited, broker.log_limiter) and the connection is closed; so is a connection whose
request does not arrive completely within `socket.request.receive.timeout.ms` (slowloris). The
broker itself never goes down on client input.
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import struct
import time
import weakref
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import structlog

from broker.apis.registry import REGISTRY
from broker.context import RequestContext
from broker.log_limiter import RateLimitedLog
from broker.memory_pool import MemoryPool
from broker.metrics.request_metrics import FETCH_KEY
from broker.purgatory import InlineFuture
from broker.quota import request_time
from broker.tls.principal import ANONYMOUS
from protocol.framing import (
    API_VERSIONS_KEY,
    decode_request_body,
    decode_request_header,
    encode_response_frame,
)
from protocol.messages import REQUESTS, ApiVersionsResponse
from protocol.primitives import DecodeError, UnsupportedVersionError
from storage.file_records import FileRecords

if TYPE_CHECKING:
    from broker.config import Listener
    from broker.sasl.authenticator import SaslAuthenticator
    from broker.server import BrokerServer

log = structlog.get_logger("odradek.network")
# every line a client can cause at will goes through this (at most 10 per 10 s, then a summary)
client_input_log = RateLimitedLog(log)
# a handler exception is our bug, but if a client can trigger it, it can trigger it in a loop
handler_error_log = RateLimitedLog(log, about="failed request handlers")

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")  # a request header's first field
SASL_HANDSHAKE_KEY = 17
MAX_IN_FLIGHT = 64
UNSUPPORTED_VERSION = 35
# a file region is written through the transport in pread chunks of at most this size when the
# socket cannot take it directly; the transport's high-water mark is a quarter of it, so one
# chunk pauses writing until the transport's buffer is empty again
STREAM_CHUNK = 256 * 1024

_pools: weakref.WeakKeyDictionary[Any, MemoryPool] = weakref.WeakKeyDictionary()


class ThrottleStart:
    """Ends a throttled response's chunks in `outgoing`: the throttle time starts when `_pump`
    reaches it, i.e. once the response was handed to the transport (KIP-219's throttle after
    send)."""

    __slots__ = ("throttle_ms",)

    def __init__(self, throttle_ms: int) -> None:
        self.throttle_ms = throttle_ms


def request_memory_pool(server: BrokerServer) -> MemoryPool:
    """The broker-wide pool of `queued.max.request.bytes` (one per server object)."""
    pool = _pools.get(server)
    if pool is None:
        pool = _pools[server] = MemoryPool(server.config["queued.max.request.bytes"])
    return pool


class _Mark:
    """A place in a connection's outgoing queue, reached once everything before it was handed to
    the transport: the start or the end of a response's bytes (ResponseTiming.dequeued / .sent).
    Only queued while metrics are on; never written."""

    __slots__ = ("reached",)

    def __init__(self, reached: Any) -> None:
        self.reached = reached


def _fetch_from_follower(request: Any) -> bool:
    """A Fetch from a follower has a replica id >= 0 (in replica_state from v15)."""
    replica_id = getattr(request, "replica_id", -1)
    if replica_id < 0:
        state = getattr(request, "replica_state", None)
        replica_id = state.replica_id if state is not None else -1
    return replica_id >= 0


class _Driven:
    """Goes on with a handling `_start_eagerly` began in the read callback and that now waits,
    still without a task: it is stepped by hand (`coro.send`) when what it awaits is done.

    Why no task (issue #20 §5): a parked Produce or Fetch waits for a DelayedFuture, whose
    InlineFuture resumes it inside the purgatory call that completed it (broker.purgatory), so
    its response is written there -- a follower's fetch response within the leader's append, a
    produce response within the follower fetch that moved the high watermark -- as Kafka's
    delayed operations call their response callbacks inline. A task would be resumed a loop
    iteration later, behind everything else ready then; on the replication round trip that was
    one such wait per hop. Anything else it awaits (an executor's future, a lock, a bare
    `yield`) resumes it from that future's done callback, as a task would.

    Its place among the connection's responses is `slot`, a future resolved with the handling's
    result (the response's chunks) or failure; the connection writes it in request order
    (`_on_done`). Cancelling the slot (the connection closed) cancels what the handling awaits
    -- a parked operation is then dropped by its purgatory -- and raises CancelledError where it
    waits, as a task's cancellation does. The handling runs with no current task, which the
    eager handlers allow (ApiHandler.eager: no asyncio.timeout, no network_client call)."""

    __slots__ = ("_conn", "_coro", "_finished", "_waiting", "slot")

    def __init__(self, conn: KafkaConnection, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._conn = conn
        self._coro = coro
        self._waiting: Any = None
        self._finished = False
        self.slot: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.slot.add_done_callback(self._slot_done)
        self._wait(waiting_on)

    def _wait(self, awaited: Any) -> None:
        if awaited is None:  # a bare yield (asyncio.sleep(0)): the next loop iteration, as a task
            asyncio.get_running_loop().call_soon(self._resumed, None)
            return
        if getattr(awaited, "_asyncio_future_blocking", None) is not True:
            self._step(RuntimeError(f"a driven request handling yielded {awaited!r}, not a future"))
            return
        awaited._asyncio_future_blocking = False
        self._waiting = awaited
        if type(awaited) is InlineFuture and not awaited.done():
            awaited.resume = self._step
        else:
            awaited.add_done_callback(self._resumed)

    def _resumed(self, _: Any) -> None:
        self._step(inline=False)  # a callback of the loop's own: nobody else's change to interrupt

    def _step(self, error: BaseException | None = None, inline: bool = True) -> None:
        if self.slot.done():
            return  # cancelled with its connection: _slot_done finishes the coroutine
        self._waiting = None
        try:
            awaited = self._coro.send(None) if error is None else self._coro.throw(error)
        except StopIteration as done:
            self._finish()
            self.slot.set_result(done.value)
        except asyncio.CancelledError:  # what it awaited was cancelled, and it did not catch that
            self._finish()
            self.slot.cancel()
        except Exception as e:
            self._finish()
            self.slot.set_exception(e)
        else:
            self._wait(awaited)
            return
        self._conn._on_done(self.slot, inline)

    def _finish(self) -> None:
        self._finished = True
        self._waiting = None

    def _slot_done(self, slot: asyncio.Future[Any]) -> None:
        if not slot.cancelled() or self._finished:
            return
        waiting, self._waiting = self._waiting, None
        if isinstance(waiting, InlineFuture):
            waiting.resume = None
        if waiting is not None and not waiting.done():
            waiting.cancel()  # a parked operation is dropped by its purgatory (DelayedFuture)
        self._finished = True
        try:
            self._coro.throw(asyncio.CancelledError())
        except (StopIteration, asyncio.CancelledError):
            return
        except Exception as e:
            log.warning("a cancelled request handling failed", peer=self._conn.peer, error=repr(e))
            return
        self._coro.close()  # it caught the cancellation and waits again: it is not resumed


class KafkaConnection(asyncio.Protocol):
    """One client connection. Lives on the event loop; no locking needed."""

    def __init__(self, server: BrokerServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.max_request = server.config["socket.request.max.bytes"]
        self.max_queued_response = server.config["queued.max.response.bytes"]
        self.receive_timeout_s = server.config["socket.request.receive.timeout.ms"] / 1000
        self.pool = request_memory_pool(server)
        self.transport: asyncio.Transport | None = None
        self.sock_fd = -1
        self.buffer = bytearray()
        self.pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        # Produce requests of this connection append in arrival order (Kafka mutes a connection
        # until its response is sent): one waiting for a segment roll must not be overtaken by
        # the next, whose batches to a partition they share would land first
        self.append_order = asyncio.Lock()
        # chunks of finished responses not yet handed to the transport, in request order:
        # bytes-like, or FileRecords sent by sendfile; `unsent` counts their bytes. With metrics
        # on, each response is between two _Marks (RequestMetrics' response queue and send times)
        self.outgoing: collections.deque[Any] = collections.deque()
        self.unsent = 0
        self.region_sent = 0  # bytes of outgoing[0] already sent when it is a FileRecords
        self.sent_waiters: list[asyncio.Future[None]] = []  # wait_sent() callers (shutdown)
        self.reserved = 0  # bytes of the pool held by the request being received
        self.memory_wait = False
        self.receive_timer: asyncio.TimerHandle | None = None
        self.peer = "?"
        self.closed = False
        self.write_paused = False
        self.read_paused = False
        self.parsing = False
        self.draining = False  # shutting down: requests not yet dispatched are left unread
        self.last_active = time.monotonic()
        # who the client is (Kafka's KafkaPrincipal as `User:<name>`), for authorization
        self.principal = ANONYMOUS
        self.tls = False  # an SSL listener's connection: file regions are read, not sendfile'd
        self.region_read: asyncio.Future[bytes] | None = None  # TLS: the chunk being read
        # a client over its quota (broker/quota): muted until the timer fires (KIP-219)
        self.throttle_timer: asyncio.TimerHandle | None = None
        # SASL listeners: authenticates the client before any other request is served (broker.sasl)
        self.sasl: SaslAuthenticator | None = None
        self.throttles_unsent = 0  # throttled responses not sent yet: muted meanwhile

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses
        sock = transport.get_extra_info("socket")
        ssl_object = transport.get_extra_info("ssl_object")
        if sock is not None:
            # as Kafka's SocketServer: a response's last segment must not wait for a delayed ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_object is None:  # under TLS the socket carries ciphertext: no sendfile
                self.sock_fd = sock.fileno()
        # resume_writing() comes when the buffer is empty, the moment sendfile may go again
        self.transport.set_write_buffer_limits(high=STREAM_CHUNK // 4, low=0)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if ssl_object is not None:
            self.tls = True
            self._authenticate(ssl_object)
        if self.server.sasl is not None:
            self.sasl = self.server.sasl.authenticator(self)
        self.server.connections.add(self)

    def _authenticate(self, ssl_object: Any) -> None:
        """The principal of a TLS connection, from its client certificate (asyncio calls
        connection_made once the handshake is done). A subject no mapping rule applies to
        closes the connection, as Kafka fails the authentication."""
        tls = self.server.tls.listeners[self.listener.name] if self.server.tls is not None else None
        if tls is None:
            return
        try:
            self.principal = tls.principal(ssl_object)
        except ValueError as e:
            client_input_log.warning("client certificate not mapped to a principal; closing connection",
                                     peer=self.peer, listener=self.listener.name, error=str(e))
            self.closed = True
            self.transport.close()  # type: ignore[union-attr]
            return
        if self.principal != ANONYMOUS:
            log.info("authenticated TLS client", peer=self.peer, listener=self.listener.name,
                     principal=self.principal, protocol=ssl_object.version())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for fut in self.pending:
            fut.cancel()
        self.pending.clear()
        self.outgoing.clear()
        self.unsent = 0
        self._release_memory()
        self.pool.forget(id(self))
        self._cancel_receive_timer()
        if self.throttle_timer is not None:
            self.throttle_timer.cancel()
            self.throttle_timer = None
        self._wake_sent_waiters()

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.last_active = time.monotonic()  # the client took our bytes: it is not idle
        self._pump()
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self.buffer += data
        self._parse()

    def _parse(self) -> None:
        """Dispatch the complete frames in the buffer while the connection is not muted: frames
        that arrived in the same read as the request that muted it wait, as unread ones do."""
        if self.parsing:
            return
        self.parsing = True
        try:
            self._parse_frames()
        finally:
            self.parsing = False

    def _parse_held(self) -> None:
        if not self.closed and not self.read_paused:
            self._parse()

    def _parse_frames(self) -> None:
        buf = self.buffer
        pos = 0
        end = len(buf)
        while end - pos >= 4 and not self.read_paused:  # (draining keeps reading paused)
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
            if self.reserved:
                self._release_memory()
            if self.receive_timer is not None:
                self._cancel_receive_timer()
            if self.sasl is not None and self._authenticating(frame):
                if self.closed:
                    return
                continue
            self._dispatch(frame)
            if self.closed:
                return
        if pos:
            del buf[:pos]
        if buf and (len(buf) < 4 or len(buf) - 4 < _SIZE.unpack_from(buf, 0)[0]):
            self._partial_request(buf)  # not when whole frames merely wait for an unmute

    def _authenticating(self, frame: bytearray) -> bool:
        """SASL listeners: True when the authenticator took `frame` (authentication, or a
        KIP-368 re-authentication beginning with a SaslHandshake) or closed the connection
        because its session expired (Kafka's SocketServer checks it as each request arrives)."""
        sasl = self.sasl
        assert sasl is not None
        if not sasl.complete:
            return sasl.receive(frame)
        if sasl.session_expiration is None:
            return False
        if len(frame) >= 2 and _API_KEY.unpack_from(frame, 0)[0] == SASL_HANDSHAKE_KEY \
                and sasl.begin_reauthentication(frame):
            return True
        if sasl.expired():
            log.info("Disconnecting expired channel", peer=self.peer, listener=self.listener.name,
                                  principal=self.principal)
            self.close()
            return True
        return False

    def eof_received(self) -> bool | None:
        return None  # close when the client half-closes

    # -- a request that has not fully arrived -------------------------------------------------

    def _partial_request(self, buf: bytearray) -> None:
        """Reserve pool memory for the request being received and time its arrival."""
        if self.receive_timer is None and self.receive_timeout_s > 0:
            self.receive_timer = asyncio.get_running_loop().call_later(
                self.receive_timeout_s, self._receive_timed_out
            )
        if self.reserved or self.memory_wait or len(buf) < 4 or not self.pool.bounded:
            return
        (size,) = _SIZE.unpack_from(buf, 0)
        if not self._reserve(size):
            self.memory_wait = True
            self.pool.wait(id(self), self._retry_reserve)
            self._update_reading()

    def _reserve(self, size: int) -> bool:
        if self.pool.try_allocate(size):
            self.reserved = size
            return True
        return False

    def _retry_reserve(self) -> bool:
        if self.closed:
            return True  # nothing to wait for any more
        (size,) = _SIZE.unpack_from(self.buffer, 0)
        if not self._reserve(size):
            return False
        self.memory_wait = False
        self._restart_receive_timer()  # the wait was ours, not the client's
        self._update_reading()
        return True

    def _release_memory(self) -> None:
        if self.reserved:
            size, self.reserved = self.reserved, 0
            self.pool.release(size)

    def _receive_timed_out(self) -> None:
        self.receive_timer = None
        if self.closed:
            return
        if self.read_paused:
            self._restart_receive_timer()  # we are not reading it: not the client's fault
            return
        self.abort(
            "request not received within socket.request.receive.timeout.ms",
            received=len(self.buffer),
            timeout_ms=int(self.receive_timeout_s * 1000),
        )

    def _restart_receive_timer(self) -> None:
        if self.receive_timer is not None:
            self._cancel_receive_timer()
            self.receive_timer = asyncio.get_running_loop().call_later(
                self.receive_timeout_s, self._receive_timed_out
            )

    def _cancel_receive_timer(self) -> None:
        if self.receive_timer is not None:
            self.receive_timer.cancel()
            self.receive_timer = None

    # -- requests ---------------------------------------------------------------------------

    def _dispatch(self, frame: bytearray) -> None:
        try:
            header, pos = decode_request_header(frame)
        except DecodeError as e:
            self.abort("malformed request header", error=str(e), size=len(frame))
            return
        key, version = header.request_api_key, header.request_api_version
        handler = REGISTRY.get(key)
        if handler is not None and handler.zk_only and not self.server.zk_mode:
            handler = None  # not enabled on a single node: as Kafka, an API not exposed closes the connection
        if handler is None or key not in REQUESTS:
            self.abort("request for an unsupported api key", api_key=key, api_version=version)
            return
        ctx = RequestContext(self.server, self, header, len(frame))
        if self.server.request_metrics is not None:
            ctx.received = self.last_active
            ctx.started = time.monotonic()
        if not handler.supports(version):
            if key == API_VERSIONS_KEY:
                # answered in the v0 layout so an old or new client can still negotiate
                body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=ctx.api_version_keys())
                self._enqueue_ready(encode_response_frame(header.correlation_id, key, 0, body))
                return
            self.abort("unsupported request version", api_key=key, api_version=version)
            return
        try:
            request = decode_request_body(header, frame, pos)  # Fetch v12's lean path first
        except UnsupportedVersionError:
            self.abort("unsupported request version", api_key=key, api_version=version)
            return
        except DecodeError as e:
            self.abort("malformed request body", api_key=key, api_version=version, error=str(e))
            return
        if handler.eager:
            self._start_eagerly(self._answer(ctx, handler.handle, request), ctx)
        else:
            task = asyncio.ensure_future(self._process(ctx, handler.handle, request))
            self.pending.append(task)
            task.add_done_callback(self._on_done)
        self._update_reading()

    def _start_eagerly(self, coro: Coroutine[Any, Any, list[Any] | None], ctx: RequestContext | None = None) -> None:
        """Run a request's handling at once, here in the read callback, up to its first wait
        (Python 3.12's eager tasks): a fetch answered from the page cache or a produce whose
        response waits for its followers needs no task of its own and no extra loop iteration
        before its answer or its append -- Produce and Fetch are the replication round's
        critical path (issue #20 §5). A handling that waits goes on without a task either
        (_Driven), its response in request order as any other."""
        try:
            waiting_on = coro.send(None)
        except StopIteration as done:
            if done.value and not self.closed:
                self._queue_finished(done.value)
            return
        except Exception as e:
            if not self.closed:
                handler_error_log.error("request handler failed; closing connection", peer=self.peer, exc_info=e)
                self.close()
            return
        if ctx is not None and ctx.started:
            ctx.suspended = time.monotonic()  # local time ends, remote (purgatory) time begins
        self.pending.append(_Driven(self, coro, waiting_on).slot)

    async def _answer(self, ctx: RequestContext, handle: Any, request: Any) -> list[Any] | None:
        """The handling of one request: its response frame's chunks (None: no response),
        counted as unsent from the moment it is finished -- a response waiting behind a slower
        one is unsent too."""
        if self.server.quotas.request.quotas and not request_time.exempt(ctx.header.request_api_key, request):
            timed = request_time.HandlerTime(handle(ctx, request))
            response = await timed
            if response is not None:  # request_percentage (broker/quota/request_time.py)
                throttle_ms = ctx.record_quota(self.server.quotas.request, timed.ns * request_time.NANOS_TO_PERCENTAGE)
                if throttle_ms > getattr(response, "throttle_time_ms", throttle_ms):
                    response.throttle_time_ms = throttle_ms
        else:
            response = await handle(ctx, request)
        h = ctx.header
        if ctx.started:
            key = h.request_api_key
            timing = self.server.request_metrics.finished(
                key, ctx.received, ctx.started, ctx.suspended,
                _fetch_from_follower(request) if key == FETCH_KEY else None)
            if response is None:
                timing.sent()  # Kafka's NoOpResponse: nothing queued, nothing sent
                return None
            chunks = encode_response_frame(h.correlation_id, key, h.request_api_version, response)
            self.unsent += _SIZE.unpack(chunks[0])[0] + 4
            return [_Mark(timing.dequeued), *chunks, _Mark(timing.sent)]
        if response is None:
            if ctx.throttle_ms:  # acks=0 produce: nothing to send, the throttle starts now
                self._start_throttle(ctx.throttle_ms)
            return None
        chunks = encode_response_frame(h.correlation_id, h.request_api_key, h.request_api_version, response)
        self.unsent += _SIZE.unpack(chunks[0])[0] + 4
        if ctx.throttle_ms:
            chunks = [*chunks, ThrottleStart(ctx.throttle_ms)]
        return chunks

    async def _process(self, ctx: RequestContext, handle: Any, request: Any) -> list[Any] | None:
        """`_answer` in a task of its own (handlers that are not eager)."""
        chunks = await self._answer(ctx, handle, request)
        pending = self.pending
        if chunks is not None and pending and pending[0] is asyncio.current_task() and not self.closed:
            # every earlier response is queued already: this one goes out now, not after the
            # task's done callback a loop iteration later. _on_done finds nothing left to queue.
            self.outgoing.extend(chunks)
            self._pump()
            return None
        return chunks

    def send_now(self, chunks: list[Any]) -> None:
        """Queue a response built outside the handlers (SASL authentication), in request order."""
        self._enqueue_ready(chunks)

    def _enqueue_ready(self, chunks: list[Any]) -> None:
        self.unsent += _SIZE.unpack(chunks[0])[0] + 4
        self._queue_finished(chunks)
        self._update_reading()

    def _queue_finished(self, chunks: list[Any]) -> None:
        """A response finished outside any task (counted in `unsent` already): written now when
        nothing is before it, else queued behind the earlier responses still being worked on."""
        if self.pending:
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_result(chunks)
            self.pending.append(fut)
            self._on_done(fut)
        else:
            self.outgoing.extend(chunks)
            self._pump()

    def _on_done(self, _: asyncio.Future[Any], inline: bool = False) -> None:
        """Queue every finished response at the head of `pending` for writing, in request order.
        `inline`: called inside whatever completed a driven handling (a purgatory call on
        another request's behalf), where frames held back by muting must not be dispatched --
        that would run this connection's next request inside the other one's state change."""
        pending = self.pending
        outgoing = self.outgoing
        while pending and pending[0].done():
            fut = pending.popleft()
            if fut.cancelled() or self.closed:
                continue
            exc = fut.exception()
            if exc is not None:
                handler_error_log.error("request handler failed; closing connection", peer=self.peer, exc_info=exc)
                self.close()
                return
            chunks = fut.result()
            if chunks:
                outgoing.extend(chunks)
        if outgoing:
            self._pump()
        self._update_reading(parse_now=not inline)

    # -- writing ----------------------------------------------------------------------------

    def _pump(self) -> None:
        """Hand queued chunks to the transport until it asks us to pause: plain bytes in one
        `writelines`, file regions by sendfile (see the module docstring)."""
        outgoing = self.outgoing
        transport = self.transport
        if transport is None:
            return
        while outgoing and not self.write_paused and not self.closed:
            head = outgoing[0]
            if type(head) is _Mark:
                outgoing.popleft()
                head.reached()
                continue
            if type(head) is FileRecords:
                if self.tls:
                    if self.region_read is None:
                        self._read_region_chunk(outgoing[0])
                    return
                if not self._send_region(outgoing[0]):
                    return
                self.unsent -= outgoing.popleft().size
                self.region_sent = 0
                continue
            batch: list[Any] = []
            n = 0
            throttle_ms = 0
            while outgoing and (kind := type(outgoing[0])) is not FileRecords and kind is not _Mark:
                c = outgoing.popleft()
                if kind is ThrottleStart:  # the throttled response is handed to the transport
                    throttle_ms = c.throttle_ms
                    break
                batch.append(c)
                n += len(c)
            self.unsent -= n
            transport.writelines(batch)
            if throttle_ms:
                self._start_throttle(throttle_ms)
        if not outgoing:
            self._wake_sent_waiters()

    def wait_sent(self) -> asyncio.Future[None]:
        """Done once every finished response was handed to the transport (or the connection
        closed): shutdown awaits it, bounded, before closing, so a fetch response still being
        streamed from its file is not cut short (transport.close() flushes what it holds)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.outgoing or self.closed:
            fut.set_result(None)
        else:
            self.sent_waiters.append(fut)
        return fut

    def _wake_sent_waiters(self) -> None:
        waiters, self.sent_waiters = self.sent_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _read_region_chunk(self, region: FileRecords) -> None:
        """TLS: read the next chunk of `region` in the executor; `_region_chunk_read` writes it."""
        left = region.size - self.region_sent
        self.region_read = asyncio.get_running_loop().run_in_executor(
            None, os.pread, region.fileno(), min(left, STREAM_CHUNK), region.position + self.region_sent)
        self.region_read.add_done_callback(self._region_chunk_read)

    def _region_chunk_read(self, read: asyncio.Future[bytes]) -> None:
        self.region_read = None
        if self.closed or read.cancelled():
            return
        outgoing = self.outgoing
        region = outgoing[0]
        try:
            data = read.result()
            if not data:
                raise EOFError(f"{region!r} is shorter than when it was read")
        except (OSError, ValueError, EOFError) as e:
            log.warning("cannot send fetched records; closing connection", peer=self.peer, error=str(e))
            self.close()
            return
        self.region_sent += len(data)
        if self.region_sent >= region.size:
            self.unsent -= outgoing.popleft().size
            self.region_sent = 0
        assert self.transport is not None
        self.transport.write(data)
        self._pump()
        self._update_reading()

    def _send_region(self, region: FileRecords) -> bool:
        """Send what is left of `region`; False when it must wait for resume_writing()."""
        transport = self.transport
        assert transport is not None
        while self.region_sent < region.size:
            pos = region.position + self.region_sent
            left = region.size - self.region_sent
            try:
                if self.sock_fd >= 0 and transport.get_write_buffer_size() == 0:
                    try:
                        sent = os.sendfile(self.sock_fd, region.fileno(), pos, left)
                    except BlockingIOError:
                        sent = -1
                    if sent > 0:
                        self.region_sent += sent
                        continue
                    if sent == 0:
                        raise EOFError(f"{region!r} is shorter than when it was read")
                # the socket is full (or holds bytes of the transport): one bounded chunk through
                # the transport, which pauses us until it drained
                data = os.pread(region.fileno(), min(left, STREAM_CHUNK), pos)
                if not data:
                    raise EOFError(f"{region!r} is shorter than when it was read")
                self.region_sent += len(data)
                transport.write(data)
            except (OSError, ValueError, EOFError) as e:
                if not self.closed:
                    log.warning("cannot send fetched records; closing connection", peer=self.peer, error=str(e))
                    self.close()
                return False
            if self.write_paused:
                return self.region_sent >= region.size
        return True

    def throttle(self) -> None:
        """A request being handled earned a throttle (quotas): the connection is muted at once,
        and the throttle time starts when that request's response is sent (`_start_throttle`,
        from the ThrottleStart its response ends with), as KIP-219's Processor starts
        throttling a channel once its response send completes."""
        self.throttles_unsent += 1
        self._update_reading(parse_now=False)

    def _start_throttle(self, throttle_ms: int) -> None:
        """Mute the connection for `throttle_ms` from now (KIP-219, Kafka's RequestChannel
        throttling): no further request is read or parsed until the time has passed; a longer
        throttle extends a running one."""
        self.throttles_unsent -= 1
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        timer = self.throttle_timer
        if timer is not None:
            if timer.when() >= until:
                self._update_reading(parse_now=False)
                return
            timer.cancel()
        self.throttle_timer = loop.call_at(until, self._unthrottle)
        self._update_reading(parse_now=False)

    def _unthrottle(self) -> None:
        self.throttle_timer = None
        self._update_reading()

    def _update_reading(self, parse_now: bool = True) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = (
            self.throttle_timer is not None
            or self.throttles_unsent
            or self.draining
            or self.write_paused
            or self.memory_wait
            or len(self.pending) >= MAX_IN_FLIGHT
            or self.unsent > self.max_queued_response
        )
        if should_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not should_pause and self.read_paused:
            self.transport.resume_reading()
            self.read_paused = False
            if self.receive_timer is not None:
                self._restart_receive_timer()
            if len(self.buffer) >= 4:  # frames held back while muted
                if parse_now:
                    self._parse()
                else:
                    asyncio.get_running_loop().call_soon(self._parse_held)

    # -- closing ----------------------------------------------------------------------------

    def drain(self) -> None:
        """Shutdown: dispatch no more requests (Kafka's processors stop reading); those in
        flight finish and every finished response is sent whole before the connection closes.
        A request read but not dispatched yet (behind a large response that muted the
        connection) is dropped with the connection, as one not yet read: the client retries."""
        self.draining = True
        self._update_reading()

    def abort(self, reason: str, **details: Any) -> None:
        """Log why (rate limited: clients trigger this at will) and drop the connection."""
        client_input_log.warning(reason + "; closing connection", peer=self.peer, listener=self.listener.name, **details)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._release_memory()
        self.pool.forget(id(self))
        self._cancel_receive_timer()
        if self.throttle_timer is not None:
            self.throttle_timer.cancel()
            self.throttle_timer = None
        self._wake_sent_waiters()
        if self.transport is not None:
            self.transport.close()

    @property
    def idle_seconds(self) -> float:
        """Time since the client last sent us bytes or took some of ours (Kafka's channel idle
        time); a request still being handled (a long poll) is not idleness. Unsent responses do
        not count as activity, so a client that never reads is closed after
        connections.max.idle.ms instead of holding its responses forever."""
        return 0.0 if self.pending else time.monotonic() - self.last_active
