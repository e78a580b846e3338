"""Outbound Kafka connections: Kafka's NetworkClient (+ its KafkaChannel), on asyncio.

Who uses it: the controller's channel to every broker (LeaderAndIsr / UpdateMetadata /
StopReplica) and the replica fetchers (Fetch to the leader). Both need what a Kafka client needs
and nothing more, so this is a Kafka client connection built on `protocol/framing.py` and the
generated codecs, not a second protocol stack.

Behaviour, as Kafka's `NetworkClient`, `InFlightRequests` and `ClusterConnectionStates`:

* One connection per destination node, opened lazily by the first request and again after it
  was lost. Connecting is bounded by `socket.connection.setup.timeout.ms` (growing to
  `.max.ms` over consecutive failed attempts); after a failed attempt or a lost connection the
  node is blacked out for `reconnect.backoff.ms * 2**failures` with +/-20 % jitter, capped at
  `reconnect.backoff.max.ms`; a connection that reached READY resets the failure count. A request
  to a node in backoff waits out the rest of it, then makes one attempt: callers that retry on
  `NetworkError` are paced by the backoff, never spin.
* On connect the client sends ApiVersions v3 (Kafka 3.9's version, with the KIP-511 software
  name); a broker that does not know v3 answers UNSUPPORTED_VERSION in the v0 layout, and the
  client retries with the highest version that answer lists for ApiVersions, or v0 (Kafka 2.4+).
  Each request then goes at the highest version both the broker advertises and our codecs know,
  or at a fixed version (the controller sends fixed inter-broker versions), checked against the
  broker's range as Kafka's NetworkClient does (UnsupportedApiVersionError, nothing sent).
* Requests are pipelined: any number may be in flight; Kafka answers them in order on one
  connection, so a response must carry the correlation id of the oldest request in flight. A
  mismatch, an undecodable response or a size prefix above `max_response_bytes` is a protocol
  violation: the connection is closed.
* `request.timeout.ms` per request: when it expires the request fails with RequestTimeoutError
  and the connection is closed, failing the others in flight with DisconnectError, as
  NetworkClient.handleTimedOutRequests does (the answers, if they ever came, would be behind the
  late one anyway).
* A lost connection fails every request in flight with DisconnectError (retriable: the request
  may or may not have been processed). A caller that is cancelled while waiting leaves its entry
  in flight, so later responses still match; the answer is dropped when it arrives.
* Flow control: `send` awaits until the transport's write buffer is under its high-water mark
  (asyncio's pause_writing/resume_writing), so a peer that does not read cannot make us buffer
  without bound. Responses are received into buffers we own (asyncio.BufferedProtocol): small
  frames in a reused scratch buffer, a large one (a fetch response) straight into a bytearray of
  its size, so its bytes are copied once, by recv.
* SASL (the inter-broker listener is SASL_PLAINTEXT or SASL_SSL): after ApiVersions the
  connection authenticates (SaslHandshake v1, SaslAuthenticate). When the broker answers a session
  lifetime (its `connections.max.reauth.ms`, KIP-368), the connection re-authenticates before the
  session ends, as Kafka's KafkaChannel/SaslClientAuthenticator do: at 85-95 % of the lifetime
  (the jitter spreads many connections' re-authentications), on the next `send` after that
  point. The broker closes a connection whose session ended at its next request, so without
  this every replica fetcher and controller connection would be cut once per lifetime. Kafka's
  broker answers one request at a time per connection and takes nothing but SASL requests during
  a re-authentication, so the re-authentication waits until no request is in flight and the
  sends that arrive meanwhile wait for it; a failed one closes the connection (DisconnectError:
  the node is reconnected, and authenticated afresh, after the backoff).

Everything here runs on the event loop that created it; nothing is thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import math
import random
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata as _metadata
from typing import Any, Protocol

import structlog

from broker.sasl.client import SaslClientError
from protocol.errors import ErrorCode, error_name
from protocol.framing import API_VERSIONS_KEY, decode_response, encode_request_frame
from protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from protocol.primitives import ApiMessage, DecodeError

__all__ = [
    "BrokerRequestSender",
    "ClientClosedError",
    "ClientConnection",
    "ConnectAttempt",
    "ConnectError",
    "ConnectionState",
    "CorrelationIdMismatchError",
    "DisconnectError",
    "ExponentialBackoff",
    "InFlightRequest",
    "InFlightRequests",
    "InvalidResponseError",
    "NetworkClient",
    "NetworkClientConfig",
    "NetworkError",
    "NodeApiVersions",
    "NodeConnection",
    "RequestTimeoutError",
    "ResponseReceiver",
    "UnknownNodeError",
    "UnsupportedApiVersionError",
    "decode_response_frame",
]

log = structlog.get_logger("odradek.network_client")

# Kafka 3.9's ApiVersionsRequest is v3; our codecs know v4 (Kafka 4.0), which a 3.9 broker
# would refuse, costing every connection a round trip.
API_VERSIONS_VERSION = 3
CLIENT_SOFTWARE_NAME = "odradek"
_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
SASL_AUTHENTICATE_KEY = 36
# Kafka's NetworkClient wraps correlation ids before the range SASL reserves at the top
_MAX_CORRELATION_ID = 2**31 - 1 - 8
# KIP-368 (Kafka's SaslClientAuthenticator.ReauthInfo): re-authenticate at 85 % of the session
# lifetime plus up to 10 % jitter, leaving room for latency and clock drift
REAUTH_WINDOW_FACTOR = 0.85
REAUTH_WINDOW_JITTER = 0.10
RECONNECT_BACKOFF_EXP_BASE = 2
RECONNECT_BACKOFF_JITTER = 0.2
CONNECTION_SETUP_TIMEOUT_EXP_BASE = 2
CONNECTION_SETUP_TIMEOUT_JITTER = 0.2
SCRATCH_BYTES = 64 * 1024


def _software_version() -> str:
    """The distribution's version, in the characters KIP-511 allows (a broker refuses others)."""
    try:
        v = _metadata.version("odradek")
    except _metadata.PackageNotFoundError:
        return "unknown"
    cleaned = "".join(c if c.isalnum() or c in ".-" else "-" for c in v).strip(".-")
    return cleaned or "unknown"


CLIENT_SOFTWARE_VERSION = _software_version()


# -- errors -----------------------------------------------------------------------------------


class NetworkError(Exception):
    """The request may not have reached the broker, or its answer was lost: retriable on a new
    connection (Kafka's NetworkException / DisconnectException are RetriableExceptions)."""


class ConnectError(NetworkError):
    """No connection to the node: refused, unreachable, connection setup timed out, or the
    ApiVersions exchange failed. The node is in reconnect backoff afterwards."""


class DisconnectError(NetworkError):
    """The connection closed while the request was in flight (Kafka's DisconnectException)."""


class RequestTimeoutError(DisconnectError):
    """No response within request.timeout.ms; the connection was closed because of it."""


class InvalidResponseError(DisconnectError):
    """The response broke the protocol (wrong correlation id, undecodable, too large); the
    connection was closed because of it."""


class UnsupportedApiVersionError(Exception):
    """The broker and our codecs have no version of the API in common, or the fixed version asked
    for is outside the broker's range (Kafka's UnsupportedVersionException). Nothing was sent;
    retrying the same request to the same broker cannot help."""


class UnknownNodeError(LookupError):
    """No address is known for the node id (update_node was never called, or it was removed)."""


class ClientClosedError(Exception):
    """The NetworkClient was closed."""


# -- pure parts -------------------------------------------------------------------------------


class ExponentialBackoff:
    """Kafka's `ExponentialBackoff`: initial * multiplier**attempts, +/- jitter, capped at max.

    The exponent stops growing at log_multiplier(max / initial), and the jittered value is
    capped at `max_ms`, so a delay never exceeds the configured maximum. With max <= initial
    the delay is the (un-jittered) initial value."""

    def __init__(
        self, initial_ms: float, multiplier: float, max_ms: float, jitter: float,
        rng: random.Random | None = None,
    ) -> None:
        self.initial_ms = min(initial_ms, max_ms)
        self.multiplier = multiplier
        self.max_ms = max_ms
        self.jitter = jitter
        self.exp_max = (
            math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier) if max_ms > initial_ms else 0.0
        )
        self._rng = rng or random.Random()

    def backoff_ms(self, attempts: int) -> float:
        if self.exp_max == 0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(attempts, self.exp_max)
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(float(int(factor * term)), self.max_ms)


@dataclass(eq=False, slots=True)
class InFlightRequest:
    """A request written to a connection and not yet answered. `future` is an asyncio future
    (Any here so that the bookkeeping is testable without a loop); `timer` its timeout."""

    correlation_id: int
    api_key: int
    api_version: int
    future: Any
    timeout_ms: float = 0.0
    timer: Any = None

    def describe(self) -> str:
        return f"{_api_name(self.api_key)} v{self.api_version} (correlation id {self.correlation_id})"


class CorrelationIdMismatchError(Exception):
    """A response whose correlation id is not that of the oldest request in flight."""


class InFlightRequests:
    """Kafka's InFlightRequests for one connection: the requests in the order they were sent.

    Kafka answers the requests of one connection in order, so a response belongs to the oldest
    one in flight and must carry its correlation id; anything else means the stream is out of
    step and the connection can only be closed."""

    def __init__(self, first_correlation_id: int = 0) -> None:
        self._requests: collections.deque[InFlightRequest] = collections.deque()
        self._next_correlation_id = first_correlation_id

    def next_correlation_id(self) -> int:
        """Increasing ids that wrap to 0 before Kafka's reserved range near 2**31 - 1."""
        corr = self._next_correlation_id
        if corr >= _MAX_CORRELATION_ID:
            corr = 0
        self._next_correlation_id = corr + 1
        return corr

    def add(self, request: InFlightRequest) -> None:
        self._requests.append(request)

    def complete_next(self, correlation_id: int) -> InFlightRequest:
        """Remove and return the oldest request if the response's id is its id."""
        if not self._requests:
            raise CorrelationIdMismatchError(f"response with correlation id {correlation_id} but no request in flight")
        head = self._requests[0]
        if head.correlation_id != correlation_id:
            raise CorrelationIdMismatchError(
                f"response with correlation id {correlation_id} but the oldest request in flight is "
                f"{head.describe()}"
            )
        return self._requests.popleft()

    def clear_all(self) -> list[InFlightRequest]:
        """Remove and return every request in flight, oldest first (the connection is gone)."""
        out = list(self._requests)
        self._requests.clear()
        return out

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Any:
        return iter(self._requests)


class ResponseReceiver:
    """Cuts 4-byte size-prefixed frames out of a byte stream, for asyncio.BufferedProtocol.

    `get_buffer()` hands out the free part of a reused scratch buffer, or, while a frame larger
    than half of it is being received, the rest of a bytearray of exactly that frame's size, so
    the bytes of a large response are written once, by recv, and delivered without a copy.
    `buffer_updated(n)` returns the frames completed by those n bytes (without size prefix).
    Errors are sticky: a size prefix below 0 or above `max_frame_bytes` sets `error`, and the
    receiver delivers nothing more."""

    def __init__(self, max_frame_bytes: int, scratch_bytes: int = SCRATCH_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._scratch = bytearray(scratch_bytes)
        self._start = 0  # first unconsumed byte of the scratch buffer
        self._end = 0  # end of the received bytes in the scratch buffer
        self._large: bytearray | None = None
        self._large_filled = 0
        self.error: str | None = None

    def get_buffer(self) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        return memoryview(self._scratch)[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        frames: list[bytes | bytearray] = []
        if self.error is not None:
            return frames
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == len(self._large):
                frames.append(self._large)
                self._large = None
            return frames
        self._end += nbytes
        buf = self._scratch
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_frame_bytes:
                self.error = f"response size {size} out of bounds (max {self.max_frame_bytes})"
                return frames
            if end - start - 4 >= size:
                frames.append(bytes(buf[start + 4 : start + 4 + size]))
                start += 4 + size
                continue
            if size > len(buf) // 2:
                # a large frame: the rest goes straight into its own buffer
                have = end - start - 4
                large = bytearray(size)
                large[:have] = buf[start + 4 : end]
                self._large, self._large_filled = large, have
                start = end
            break
        if start == end:
            start = end = 0
        elif start > 0:
            # keep the partial frame at the front; it fits (small frames are < half the buffer)
            buf[: end - start] = buf[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end
        return frames


def decode_response_frame(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> ApiMessage:
    """The body of a response frame (size prefix removed) to a request sent at `api_version`.

    One exception to "the response has the request's version", as Kafka's
    ApiVersionsResponse.parse: a broker that does not know the ApiVersions version we sent answers
    UNSUPPORTED_VERSION in the v0 layout (its error code sits right after the v0 header)."""
    if (
        api_key == API_VERSIONS_KEY
        and api_version > 0
        and len(frame) >= 6
        and _INT16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION
    ):
        api_version = 0
    return decode_response(frame, api_key, api_version)[1]  # type: ignore[arg-type]


def _api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    return cls.__name__.removesuffix("Request") if cls is not None else f"api key {api_key}"


def _codec_range(api_key: int) -> tuple[int, int] | None:
    req, resp = REQUESTS.get(api_key), RESPONSES.get(api_key)
    if req is None or resp is None:
        return None
    return max(req.MIN_VERSION, resp.MIN_VERSION), min(req.MAX_VERSION, resp.MAX_VERSION)


class NodeApiVersions:
    """The API version ranges a broker advertised, intersected with what our codecs know
    (Kafka's NodeApiVersions)."""

    def __init__(self, ranges: Mapping[int, tuple[int, int]]) -> None:
        self.ranges: dict[int, tuple[int, int]] = dict(ranges)

    @classmethod
    def from_response(cls, response: ApiVersionsResponse) -> NodeApiVersions:
        return cls({k.api_key: (k.min_version, k.max_version) for k in response.api_keys})

    def latest_usable_version(self, api_key: int) -> int:
        """The highest version of `api_key` both the broker and our codecs support."""
        broker = self.ranges.get(api_key)
        if broker is None:
            raise UnsupportedApiVersionError(f"the broker does not support {_api_name(api_key)}")
        ours = _codec_range(api_key)
        if ours is None:
            raise UnsupportedApiVersionError(f"no codec for {_api_name(api_key)}")
        low, high = max(broker[0], ours[0]), min(broker[1], ours[1])
        if low > high:
            raise UnsupportedApiVersionError(
                f"no common version of {_api_name(api_key)}: the broker supports {broker[0]}-{broker[1]}, "
                f"we know {ours[0]}-{ours[1]}"
            )
        return high

    def check_version(self, api_key: int, version: int) -> int:
        """`version` if both the broker and our codecs support it."""
        broker = self.ranges.get(api_key)
        ours = _codec_range(api_key)
        if broker is None or ours is None or not (
            max(broker[0], ours[0]) <= version <= min(broker[1], ours[1])
        ):
            have = "none" if broker is None else f"{broker[0]}-{broker[1]}"
            raise UnsupportedApiVersionError(
                f"{_api_name(api_key)} v{version} is not supported (broker: {have}, ours: "
                f"{'none' if ours is None else f'{ours[0]}-{ours[1]}'})"
            )
        return version


# -- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkClientConfig:
    """The client settings, with Kafka's client defaults; the broker passes its inter-broker
    values (e.g. `controller.socket.timeout.ms` as the request timeout of the controller channel)."""

    client_id: str = "odradek"
    request_timeout_ms: float = 30_000  # request.timeout.ms
    reconnect_backoff_ms: float = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: float = 1_000  # reconnect.backoff.max.ms
    connection_setup_timeout_ms: float = 10_000  # socket.connection.setup.timeout.ms
    connection_setup_timeout_max_ms: float = 30_000  # socket.connection.setup.timeout.max.ms
    # a size prefix above this is a protocol violation (Kafka's broker default for requests,
    # socket.request.max.bytes); also stops us allocating 1.2 GB for a peer that says "HTTP"
    max_response_bytes: int = 100 * 1024 * 1024
    # send() waits while more than this is queued in the transport unsent
    write_buffer_high_bytes: int = 256 * 1024
    # an ssl.SSLContext: the connection speaks TLS (the broker's inter-broker listener is SSL),
    # verifying the peer's certificate against the host connected to when the context says so
    ssl_context: Any = None
    # a SaslClientCredentials: the connection authenticates with SASL after ApiVersions (the
    # broker's inter-broker listener is SASL_PLAINTEXT or SASL_SSL)
    sasl: Any = None


# -- one connection ---------------------------------------------------------------------------


class ClientConnection(asyncio.BufferedProtocol):
    """One connection to one broker (Kafka's KafkaChannel plus the per-connection half of
    NetworkClient). Open it with `ClientConnection.open()`, which also negotiates versions."""

    def __init__(self, label: str, config: NetworkClientConfig) -> None:
        self.label = label
        self.config = config
        self.transport: asyncio.Transport | None = None
        self.in_flight = InFlightRequests()
        self.api_versions: NodeApiVersions | None = None
        self.api_versions_version: int | None = None  # the ApiVersions version that was answered
        self.closed = False
        self.close_reason: str | None = None
        self.on_close: Callable[[ClientConnection], None] | None = None
        self._receiver = ResponseReceiver(config.max_response_bytes)
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # KIP-368: loop time from which the next send re-authenticates first (None: the session
        # does not end), the re-authentication in progress, and how many completed
        self.reauth_at: float | None = None
        self.reauthentications = 0
        self._reauth: asyncio.Task[None] | None = None
        self._idle_waiters: list[asyncio.Future[None]] = []

    @classmethod
    async def open(
        cls, host: str, port: int, config: NetworkClientConfig | None = None, *,
        label: str | None = None, connect_timeout_ms: float | None = None,
    ) -> ClientConnection:
        """Connect (bounded by the setup timeout) and negotiate API versions; ConnectError if
        either fails."""
        config = config or NetworkClientConfig()
        label = label or f"{host}:{port}"
        timeout_ms = config.connection_setup_timeout_ms if connect_timeout_ms is None else connect_timeout_ms
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                _, conn = await loop.create_connection(
                    lambda: cls(label, config), host, port, ssl=config.ssl_context,
                    server_hostname=host if config.ssl_context is not None else None)
        except TimeoutError:
            raise ConnectError(f"connection to {label} not established within {timeout_ms:.0f} ms") from None
        except OSError as e:
            raise ConnectError(f"cannot connect to {label}: {e}") from e
        try:
            await conn._negotiate_api_versions()
            if config.sasl is not None:
                await conn._authenticate(config.sasl)
        except NetworkError as e:
            conn.close(f"ApiVersions failed: {e}")
            raise ConnectError(f"ApiVersions with {label} failed: {e}") from e
        except BaseException:
            conn.close("ApiVersions abandoned")
            raise
        return conn

    async def _negotiate_api_versions(self) -> None:
        version = API_VERSIONS_VERSION
        for _ in range(API_VERSIONS_VERSION + 1):  # each retry is a lower version
            request = ApiVersionsRequest(
                client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION
            )
            response = await self._send_at(request, version, None)
            assert isinstance(response, ApiVersionsResponse)
            if response.error_code == 0:
                self.api_versions = NodeApiVersions.from_response(response)
                self.api_versions_version = version
                return
            if response.error_code != ErrorCode.UNSUPPORTED_VERSION or version == 0:
                raise ConnectError(f"ApiVersions v{version} answered {error_name(response.error_code)}")
            # Kafka 2.4+ lists the ApiVersions versions it supports in this answer; older: v0
            theirs = next((k.max_version for k in response.api_keys if k.api_key == API_VERSIONS_KEY), 0)
            version = max(0, min(theirs, version - 1))
        raise ConnectError("ApiVersions negotiation did not converge")

    async def _authenticate(self, credentials: Any) -> None:
        """SaslHandshake v1 then the mechanism's tokens in SaslAuthenticate requests (Kafka's
        SaslClientAuthenticator); ConnectError with the server's message if refused. Sets when
        to re-authenticate from the session lifetime the last answer carries."""
        hs = await self._send_at(SaslHandshakeRequest(mechanism=credentials.mechanism), 1, None)
        if hs.error_code != 0:
            raise ConnectError(f"SASL handshake for {credentials.mechanism} answered {error_name(hs.error_code)} "
                               f"(enabled: {', '.join(hs.mechanisms)})")
        exchange = credentials.exchange()
        version = self.usable_version(SASL_AUTHENTICATE_KEY)
        token = exchange.step(None)
        lifetime_ms = 0
        while token is not None:
            resp = await self._send_at(SaslAuthenticateRequest(auth_bytes=token), version, None)
            if resp.error_code != 0:
                raise ConnectError(f"SASL authentication failed: {resp.error_message}")
            lifetime_ms = resp.session_lifetime_ms if version >= 1 else 0
            try:
                token = exchange.step(bytes(resp.auth_bytes))
            except SaslClientError as e:
                raise ConnectError(f"SASL authentication failed: {e}") from e
        self.reauth_at = None
        if lifetime_ms > 0:
            factor = REAUTH_WINDOW_FACTOR + random.random() * REAUTH_WINDOW_JITTER
            self.reauth_at = asyncio.get_running_loop().time() + lifetime_ms * factor / 1000

    def _reauthentication_due(self) -> bool:
        return self._reauth is not None or (
            self.reauth_at is not None and asyncio.get_running_loop().time() >= self.reauth_at)

    async def _reauthenticate(self) -> None:
        """Re-authenticate once for every sender that finds it due; a failure closes the
        connection and raises DisconnectError."""
        task = self._reauth
        if task is None:
            task = self._reauth = asyncio.ensure_future(self._run_reauthentication())
            task.add_done_callback(_retrieve)
        await asyncio.shield(task)

    async def _run_reauthentication(self) -> None:
        try:
            while self.in_flight and not self.closed:  # the broker takes only SASL requests now
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._idle_waiters.append(waiter)
                await waiter
            if self.closed:
                raise DisconnectError(f"connection to {self.label} is closed ({self.close_reason})")
            try:
                await self._authenticate(self.config.sasl)
            except ConnectError as e:
                self.close(f"re-authentication failed: {e}")
                raise DisconnectError(f"{self.label}: re-authentication failed: {e}") from e
            self.reauthentications += 1
            log.debug("re-authenticated", peer=self.label, mechanism=self.config.sasl.mechanism,
                      reauthentications=self.reauthentications)
        finally:
            self._reauth = None

    # -- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Kafka's clients
        self.transport.set_write_buffer_limits(high=self.config.write_buffer_high_bytes)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return  # bytes that were on their way when we closed
        for frame in self._receiver.buffer_updated(nbytes):
            self._on_response(frame)
            if self.closed:
                return
        if self._receiver.error is not None:
            self._fail_head_and_close(self._receiver.error)

    def eof_received(self) -> bool | None:
        return None  # the broker closed its side: close ours

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close("closed by the broker" if exc is None else f"connection lost: {exc}")
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain_waiters()

    @property
    def write_paused(self) -> bool:
        """The transport holds more than write_buffer_high_bytes: send() and drain() wait."""
        return self._write_paused

    # -- requests ---------------------------------------------------------------------------

    def usable_version(self, api_key: int, version: int | None = None) -> int:
        """The version a request of `api_key` goes at: `version` checked against the broker's
        range, or the highest one both sides support."""
        if self.api_versions is None:
            raise UnsupportedApiVersionError(f"{self.label}: API versions not negotiated yet")
        if version is None:
            return self.api_versions.latest_usable_version(api_key)
        return self.api_versions.check_version(api_key, version)

    def send_nowait(
        self, request: ApiMessage, *, version: int | None = None, timeout_ms: float | None = None
    ) -> asyncio.Future[ApiMessage]:
        """Write the request now and return the future of its response (pipelining without a
        task per request). Callers that write many should await `drain()` between them. It
        cannot wait for a KIP-368 re-authentication: while one is due or running, `send`."""
        assert request.API_KEY is not None
        if self._reauthentication_due():
            raise DisconnectError(f"{self.label}: re-authentication due; use send()")
        return self._write(request, self.usable_version(request.API_KEY, version), timeout_ms)

    async def send(
        self, request: ApiMessage, *, version: int | None = None, timeout_ms: float | None = None
    ) -> ApiMessage:
        """Send and await the response. Raises DisconnectError (RequestTimeoutError,
        InvalidResponseError) when the connection fails first, UnsupportedApiVersionError when
        there is no usable version (nothing sent). Re-authenticates first when it is due."""
        while self._reauthentication_due():
            await self._reauthenticate()
        fut = self.send_nowait(request, version=version, timeout_ms=timeout_ms)
        await self.drain()
        return await fut

    async def _send_at(self, request: ApiMessage, version: int, timeout_ms: float | None) -> ApiMessage:
        fut = self._write(request, version, timeout_ms)
        await self.drain()
        return await fut

    def _write(self, request: ApiMessage, version: int, timeout_ms: float | None) -> asyncio.Future[ApiMessage]:
        if self.closed or self.transport is None:
            raise DisconnectError(f"connection to {self.label} is closed ({self.close_reason})")
        api_key = request.API_KEY
        assert api_key is not None
        corr = self.in_flight.next_correlation_id()
        frame = encode_request_frame(api_key, version, corr, self.config.client_id, request)
        loop = asyncio.get_running_loop()
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        entry = InFlightRequest(corr, api_key, version, loop.create_future(), timeout)
        entry.timer = loop.call_later(timeout / 1000, self._request_timed_out, entry)
        self.in_flight.add(entry)
        self.transport.write(frame)
        return entry.future  # type: ignore[no-any-return]

    async def drain(self) -> None:
        """Return once the transport's write buffer is below its high-water mark (or the
        connection closed: the requests in flight then fail on their own)."""
        if self._write_paused and not self.closed:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def _on_response(self, frame: bytes | bytearray) -> None:
        if len(frame) < 4:
            self._fail_head_and_close(f"response of {len(frame)} bytes has no header")
            return
        (corr,) = _SIZE.unpack_from(frame, 0)
        try:
            entry = self.in_flight.complete_next(corr)
        except CorrelationIdMismatchError as e:
            self._fail_head_and_close(str(e))
            return
        entry.timer.cancel()
        if self._idle_waiters and not self.in_flight:
            self._wake(self._idle_waiters)
            self._idle_waiters = []
        if entry.future.done():
            return  # its caller was cancelled; the answer only had to be consumed in order
        try:
            body = decode_response_frame(frame, entry.api_key, entry.api_version)
        except DecodeError as e:
            entry.future.set_exception(InvalidResponseError(f"{self.label}: cannot decode the response to {entry.describe()}: {e}"))
            self.close(f"undecodable response to {entry.describe()}")
            return
        entry.future.set_result(body)

    def _request_timed_out(self, entry: InFlightRequest) -> None:
        if self.closed:
            return
        self.close(f"{entry.describe()} not answered within {entry.timeout_ms:.0f} ms", timed_out=entry)

    def _fail_head_and_close(self, reason: str) -> None:
        """A protocol violation: the oldest request gets InvalidResponseError, the rest
        DisconnectError, and the connection is closed."""
        head = next(iter(self.in_flight), None)
        if head is not None and not head.future.done():
            head.future.set_exception(InvalidResponseError(f"{self.label}: {reason}"))
        log.warning("protocol violation; closing connection", peer=self.label, reason=reason)
        self.close(reason)

    # -- closing ----------------------------------------------------------------------------

    def close(self, reason: str = "closed by the client", *, timed_out: InFlightRequest | None = None) -> None:
        """Close now; every request in flight fails (RequestTimeoutError for `timed_out`,
        DisconnectError for the others)."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        for entry in self.in_flight.clear_all():
            entry.timer.cancel()
            if entry.future.done():
                continue
            if entry is timed_out:
                exc: DisconnectError = RequestTimeoutError(
                    f"{self.label}: {entry.describe()} not answered within {entry.timeout_ms:.0f} ms"
                )
            else:
                exc = DisconnectError(
                    f"{self.label}: connection closed ({reason}) before the response to {entry.describe()}"
                )
            entry.future.set_exception(exc)
        self._wake_drain_waiters()
        self._wake(self._idle_waiters)
        self._idle_waiters = []
        if self.transport is not None:
            # nothing we still hold needs to arrive; a peer that stopped reading must not keep
            # the socket open by holding our unsent bytes
            if self.transport.get_write_buffer_size():
                self.transport.abort()
            else:
                self.transport.close()
        elif not self._lost.done():
            self._lost.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    async def wait_closed(self) -> None:
        """Until the transport is gone (connection_lost)."""
        await asyncio.shield(self._lost)

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        self._wake(waiters)

    @staticmethod
    def _wake(waiters: list[asyncio.Future[None]]) -> None:
        for w in waiters:
            if not w.done():
                w.set_result(None)


# -- per node ---------------------------------------------------------------------------------


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"  # TCP connect and the ApiVersions exchange
    READY = "ready"


@dataclass(slots=True)
class ConnectAttempt:
    """One connection attempt, kept for diagnostics (and for tests that check the backoff)."""

    started: float  # loop time
    ended: float | None = None  # loop time it failed or the connection was lost
    backoff_ms: float | None = None  # the reconnect backoff that began then
    error: str | None = None


@dataclass(eq=False)
class NodeConnection:
    """A destination node: its address, its connection (at most one) and the
    ClusterConnectionStates bookkeeping for it. Times are the event loop's clock, in seconds."""

    node_id: int
    host: str
    port: int
    reconnect_backoff: ExponentialBackoff
    setup_timeout: ExponentialBackoff
    state: ConnectionState = ConnectionState.DISCONNECTED
    connection: ClientConnection | None = None
    failed_attempts: int = 0  # since the last READY
    failed_connect_attempts: int = 0  # consecutive attempts that never connected
    last_connect_attempt: float = -math.inf  # start of the last attempt, or when it ended
    reconnect_backoff_ms: float = 0.0
    connection_setup_timeout_ms: float = 0.0
    attempts: collections.deque[ConnectAttempt] = field(default_factory=lambda: collections.deque(maxlen=128))
    connect_task: asyncio.Task[ClientConnection] | None = None

    def __post_init__(self) -> None:
        self.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(0)
        self.connection_setup_timeout_ms = self.setup_timeout.backoff_ms(0)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connection_delay(self, now: float) -> float:
        """Seconds until a connection attempt may start (0: now)."""
        if self.state is not ConnectionState.DISCONNECTED:
            return 0.0
        return max(0.0, self.last_connect_attempt + self.reconnect_backoff_ms / 1000 - now)

    def can_connect(self, now: float) -> bool:
        return self.state is ConnectionState.DISCONNECTED and self.connection_delay(now) == 0

    def connecting(self, now: float) -> None:
        self.state = ConnectionState.CONNECTING
        self.last_connect_attempt = now
        self.attempts.append(ConnectAttempt(started=now))

    def ready(self) -> None:
        self.state = ConnectionState.READY
        self.failed_attempts = 0
        self.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(0)
        self.failed_connect_attempts = 0
        self.connection_setup_timeout_ms = self.setup_timeout.backoff_ms(0)

    def disconnected(self, now: float, error: str | None = None) -> None:
        """A failed attempt or a lost connection: the backoff starts now, one step longer."""
        self.last_connect_attempt = now
        self.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(self.failed_attempts)
        self.failed_attempts += 1
        if self.state is ConnectionState.CONNECTING:
            self.failed_connect_attempts += 1
            self.connection_setup_timeout_ms = self.setup_timeout.backoff_ms(self.failed_connect_attempts)
        else:
            self.failed_connect_attempts = 0
            self.connection_setup_timeout_ms = self.setup_timeout.backoff_ms(0)
        self.state = ConnectionState.DISCONNECTED
        self.connection = None
        if self.attempts and self.attempts[-1].ended is None:
            last = self.attempts[-1]
            last.ended, last.backoff_ms, last.error = now, self.reconnect_backoff_ms, error


# -- the client -------------------------------------------------------------------------------


class BrokerRequestSender(Protocol):
    """What the controller's channel needs of a network client (it must not import broker/):
    know where broker N is, send it a request and await the response. `send` raises NetworkError
    subclasses when the request may be retried, UnsupportedApiVersionError when it cannot."""

    def update_node(self, node_id: int, host: str, port: int) -> None: ...

    def remove_node(self, node_id: int) -> None: ...

    async def send(
        self, node_id: int, request: ApiMessage, *, version: int | None = None, timeout_ms: float | None = None
    ) -> ApiMessage: ...


class NetworkClient:
    """Kafka's NetworkClient for one owner (the controller channel, or one replica fetcher):
    one lazily (re)connected connection per node, with backoff between attempts."""

    def __init__(
        self, config: NetworkClientConfig | None = None, nodes: Mapping[int, tuple[str, int]] | None = None,
        *, rng: random.Random | None = None,
    ) -> None:
        self.config = config or NetworkClientConfig()
        self._rng = rng or random.Random()
        self._nodes: dict[int, NodeConnection] = {}
        self.closed = False
        for node_id, (host, port) in (nodes or {}).items():
            self.update_node(node_id, host, port)

    # -- nodes ------------------------------------------------------------------------------

    def update_node(self, node_id: int, host: str, port: int) -> None:
        """Set the node's address; a changed address closes the old connection and starts over
        with fresh backoff state, as ClusterConnectionStates does when the host changes."""
        node = self._nodes.get(node_id)
        if node is not None:
            if (node.host, node.port) == (host, port):
                return
            self._drop(node, f"address changed to {host}:{port}")
        c = self.config
        self._nodes[node_id] = NodeConnection(
            node_id, host, port,
            reconnect_backoff=ExponentialBackoff(
                c.reconnect_backoff_ms, RECONNECT_BACKOFF_EXP_BASE, c.reconnect_backoff_max_ms,
                RECONNECT_BACKOFF_JITTER, self._rng),
            setup_timeout=ExponentialBackoff(
                c.connection_setup_timeout_ms, CONNECTION_SETUP_TIMEOUT_EXP_BASE,
                c.connection_setup_timeout_max_ms, CONNECTION_SETUP_TIMEOUT_JITTER, self._rng),
        )

    def remove_node(self, node_id: int) -> None:
        """Forget the node; its requests in flight fail with DisconnectError."""
        node = self._nodes.pop(node_id, None)
        if node is not None:
            self._drop(node, "node removed")

    def node(self, node_id: int) -> NodeConnection:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise UnknownNodeError(f"no address known for node {node_id}") from None

    def nodes(self) -> dict[int, NodeConnection]:
        return dict(self._nodes)

    def connection_state(self, node_id: int) -> ConnectionState:
        return self.node(node_id).state

    def is_ready(self, node_id: int) -> bool:
        node = self._nodes.get(node_id)
        return node is not None and node.state is ConnectionState.READY

    # -- connecting -------------------------------------------------------------------------

    async def ready(self, node_id: int) -> ClientConnection:
        """The node's connection, opened if needed: waits out the rest of a reconnect backoff,
        then makes one attempt (shared by concurrent callers). ConnectError if it fails."""
        if self.closed:
            raise ClientClosedError("network client closed")
        node = self.node(node_id)
        if node.state is ConnectionState.READY and node.connection is not None:
            return node.connection
        task = node.connect_task
        if task is None:
            task = node.connect_task = asyncio.ensure_future(self._connect(node))
            task.add_done_callback(_retrieve)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                # the attempt was called off under us (node removed or moved, client closed),
                # which is not a cancellation of the caller
                raise ConnectError(f"connection attempt to node {node_id} abandoned") from None
            raise

    async def _connect(self, node: NodeConnection) -> ClientConnection:
        loop = asyncio.get_running_loop()
        try:
            delay = node.connection_delay(loop.time())
            if delay > 0:
                await asyncio.sleep(delay)  # the reconnect backoff itself
            node.connecting(loop.time())
            label = f"node {node.node_id} ({node.address})"
            try:
                conn = await ClientConnection.open(
                    node.host, node.port, self.config, label=label,
                    connect_timeout_ms=node.connection_setup_timeout_ms,
                )
            except ConnectError as e:
                node.disconnected(loop.time(), str(e))
                (log.warning if node.failed_attempts == 1 else log.debug)(
                    "connection failed; backing off", node=node.node_id, address=node.address,
                    error=str(e), backoff_ms=int(node.reconnect_backoff_ms),
                    failed_attempts=node.failed_attempts,
                )
                raise
            except BaseException:
                node.disconnected(loop.time(), "connect abandoned")
                raise
            if conn.closed or self._nodes.get(node.node_id) is not node:
                reason = conn.close_reason or "node removed while connecting"
                conn.close(reason)
                node.disconnected(loop.time(), reason)
                raise ConnectError(f"{label}: {reason}")
            node.connection = conn
            node.ready()
            conn.on_close = lambda c: self._on_connection_closed(node, c)
            log.debug("connected", node=node.node_id, address=node.address,
                      api_versions_version=conn.api_versions_version)
            return conn
        finally:
            node.connect_task = None

    def _on_connection_closed(self, node: NodeConnection, conn: ClientConnection) -> None:
        if node.connection is conn:
            node.disconnected(asyncio.get_running_loop().time(), conn.close_reason)
            log.info("disconnected", node=node.node_id, address=node.address, reason=conn.close_reason,
                     backoff_ms=int(node.reconnect_backoff_ms))

    # -- requests ---------------------------------------------------------------------------

    async def send(
        self, node_id: int, request: ApiMessage, *, version: int | None = None, timeout_ms: float | None = None
    ) -> ApiMessage:
        """Send `request` to the node (connecting first if needed) and await the response, at
        `version` or the highest version both sides support. Raises ConnectError,
        DisconnectError (and its RequestTimeoutError, InvalidResponseError), all NetworkError
        and retriable; UnsupportedApiVersionError (nothing sent); UnknownNodeError."""
        conn = await self.ready(node_id)
        return await conn.send(request, version=version, timeout_ms=timeout_ms)

    def disconnect(self, node_id: int, reason: str = "disconnected by the client") -> None:
        """Close the node's connection (Kafka's NetworkClient.disconnect): requests in flight
        fail with DisconnectError and the reconnect backoff applies."""
        node = self._nodes.get(node_id)
        if node is not None and node.connection is not None:
            node.connection.close(reason)

    def _drop(self, node: NodeConnection, reason: str) -> None:
        if node.connect_task is not None:
            node.connect_task.cancel()
        if node.connection is not None:
            node.connection.close(reason)

    async def close(self) -> None:
        """Close every connection (requests in flight fail) and wait until they are gone."""
        self.closed = True
        conns = [n.connection for n in self._nodes.values() if n.connection is not None]
        tasks = [n.connect_task for n in self._nodes.values() if n.connect_task is not None]
        for node in self._nodes.values():
            self._drop(node, "client closed")
        await asyncio.gather(*tasks, return_exceptions=True)  # cancelled or failed: gone
        for conn in conns:
            await conn.wait_closed()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a shared connect attempt's exception as seen even when every waiter went away."""
    if not task.cancelled():
        task.exception()
