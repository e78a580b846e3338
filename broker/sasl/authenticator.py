"""The server side of SASL authentication on one connection, as Kafka's SaslServerAuthenticator.

States (Kafka's SaslState): HANDSHAKE_OR_VERSIONS_REQUEST -> (ApiVersions) HANDSHAKE_REQUEST ->
(SaslHandshake) AUTHENTICATE (v1: tokens framed in SaslAuthenticate requests) or RAW_TOKEN (v0:
bare size-prefixed tokens) -> COMPLETE, or FAILED. Before COMPLETE, ApiVersions is answered as
usual and any other request closes the connection (Kafka throws IllegalSaslStateException), so
nothing is served to an unauthenticated client. A handshake naming a mechanism the listener does
not enable is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones and the connection is
closed (after the client's close, as below). A failed authentication is answered
SASL_AUTHENTICATION_FAILED with Kafka's message (v1; v0 gets no answer) after
`connection.failed.authentication.delay.ms`, then the connection closes: the delay slows down
password guessing, as Kafka's delayed close does. Unlike Kafka, which closes the socket right after
writing the answer, the broker then waits for the client to close (at most FAILED_ANSWER_LINGER_S):
a client that reads its socket to the end before it parses what it read (kafka-python 3.0's
transport) drops an answer followed by the close in the same read and reports only "socket
disconnected", never the broker's message.

The connection (broker.network) hands every frame here until `complete`; `receive` answers the
SASL requests itself through `conn.send_now` and returns False for a frame the connection must
dispatch (ApiVersions).

Re-authentication (KIP-368), as Kafka's SaslServerAuthenticator.ReauthInfo and KafkaChannel: with
`connections.max.reauth.ms` > 0 for the mechanism, a completed authentication answers that
lifetime as `session_lifetime_ms` and the session expires after it. The connection asks `expired`
before it dispatches a request and closes an expired connection (Kafka's SocketServer does so on
the request's arrival, whatever it is). A SaslHandshake on an authenticated connection with a
session expiry begins a re-authentication (`begin_reauthentication`; at most one a second, else it
is dispatched and answered ILLEGAL_SASL_STATE): the same mechanism, then the same principal, or the
authentication fails and the connection closes; a success starts a new session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.apis.registry import REGISTRY
from broker.log_limiter import RateLimitedLog
from broker.sasl.errors import SaslAuthenticationError, SaslError
from protocol.framing import API_VERSIONS_KEY, decode_request_header, encode_response_frame
from protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from protocol.primitives import DecodeError, UnsupportedVersionError

if TYPE_CHECKING:
    from broker.network import KafkaConnection

log = structlog.get_logger("odradek.sasl")
client_input_log = RateLimitedLog(log)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
HANDSHAKE = "HANDSHAKE_REQUEST"
AUTHENTICATE = "AUTHENTICATE"
RAW_TOKEN = "RAW_TOKEN"
COMPLETE = "COMPLETE"
FAILED = "FAILED"
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
# How long a refusal's answer (failed authentication, unsupported mechanism) waits for the client to
# close before the broker does:
# long enough for a loaded client to read it, short enough that a guesser holds few sockets
FAILED_ANSWER_LINGER_S = 1.0


class MechanismServer(Protocol):
    """A mechanism's server (Java's SaslServer): evaluate client tokens until complete."""

    mechanism: str
    complete: bool
    authorization_id: str | None

    def evaluate(self, response: bytes) -> bytes: ...


class SaslAuthenticator:
    def __init__(self, conn: KafkaConnection, mechanisms: list[str],
                 servers: Callable[[str], MechanismServer], failed_delay_s: float,
                 max_reauth_ms: Callable[[str], int] = lambda _: 0) -> None:
        self.conn = conn
        self.mechanisms = mechanisms
        self._servers = servers
        self.failed_delay_s = failed_delay_s
        self._max_reauth_ms = max_reauth_ms  # connections.max.reauth.ms of a mechanism (0: none)
        self.state = HANDSHAKE_OR_VERSIONS
        self.server: MechanismServer | None = None
        # KIP-368: when the session ends (monotonic s; None: never), and the re-authentication
        # in progress: the mechanism and principal it must keep (None: a first authentication)
        self.session_expiration: float | None = None
        self.last_reauth_start = 0.0
        self.previous: tuple[str, str] | None = None

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def expired(self) -> bool:
        """The session has ended: the connection serves nothing more but a re-authentication."""
        return self.session_expiration is not None and time.monotonic() > self.session_expiration

    def begin_reauthentication(self, frame: bytearray) -> bool:
        """A SaslHandshake arrived on the authenticated connection: True when it begins a
        re-authentication (answered here), False when the connection dispatches it as any
        request (no session expiry, or the last re-authentication began under a second ago)."""
        if self.session_expiration is None or self.server is None:
            return False
        now = time.monotonic()
        if self.last_reauth_start and now - self.last_reauth_start < MIN_REAUTH_INTERVAL_S:
            return False
        self.last_reauth_start = now
        self.previous = (self.server.mechanism, self.conn.principal)
        self.state = HANDSHAKE
        self.receive(frame)
        return True

    def receive(self, frame: bytearray) -> bool:
        """Handle one frame received before authentication completed; False: the connection
        dispatches it (ApiVersions)."""
        if self.state == FAILED:
            return True  # waiting for the delayed close: nothing more is read
        if self.state == RAW_TOKEN:
            self._raw_token(bytes(frame))
            return True
        try:
            header, pos = decode_request_header(frame)
        except DecodeError as e:
            self.conn.abort("malformed request header during SASL authentication", error=str(e))
            return True
        key = header.request_api_key
        if key == API_VERSIONS_KEY and self.state == HANDSHAKE_OR_VERSIONS:
            # an unsupported version is answered (UNSUPPORTED_VERSION, by the connection) and the
            # client asks again at one it can use: only an answered one moves on, as in Kafka
            handler = REGISTRY.get(API_VERSIONS_KEY)
            if handler is not None and handler.supports(header.request_api_version):
                self.state = HANDSHAKE
            return False
        expected = SASL_AUTHENTICATE_KEY if self.state == AUTHENTICATE else SASL_HANDSHAKE_KEY
        if key != expected:
            during = "SASL authentication" if self.state == AUTHENTICATE else "SASL handshake"
            self.conn.abort(f"Unexpected Kafka request of type {key} during {during}",
                            api_key=key, api_version=header.request_api_version)
            return True
        try:
            request = (SaslAuthenticateRequest if key == SASL_AUTHENTICATE_KEY else SaslHandshakeRequest).decode(
                frame, header.request_api_version, pos)
        except (DecodeError, UnsupportedVersionError) as e:
            self.conn.abort("malformed or unsupported SASL request", api_key=key,
                            api_version=header.request_api_version, error=str(e))
            return True
        if key == SASL_HANDSHAKE_KEY:
            self._handshake(header, request)
        else:
            self._authenticate(header, request)
        return True

    def _respond(self, header: Any, body: Any) -> None:
        self.conn.send_now(encode_response_frame(header.correlation_id, header.request_api_key,
                                                 header.request_api_version, body))

    def _handshake(self, header: Any, request: SaslHandshakeRequest) -> None:
        mechanism = request.mechanism
        if mechanism not in self.mechanisms:
            client_input_log.warning("Unsupported SASL mechanism; closing connection", peer=self.conn.peer,
                                     listener=self.conn.listener.name, mechanism=mechanism,
                                     enabled=self.mechanisms)
            self._respond(header, SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM,
                                                        mechanisms=list(self.mechanisms)))
            self._close_after_answer()
            return
        self._respond(header, SaslHandshakeResponse(error_code=0, mechanisms=list(self.mechanisms)))
        if self.previous is not None and self.previous[0] != mechanism:
            assert self.server is not None
            self.state = FAILED  # Kafka's REAUTH_BAD_MECHANISM: fails the re-authentication
            self.conn.abort(f"SASL mechanism '{mechanism}' requested by client is not supported for "
                            f"re-authentication of mechanism '{self.previous[0]}'")
            return
        self.server = self._servers(mechanism)
        self.state = AUTHENTICATE if header.request_api_version >= 1 else RAW_TOKEN

    def _authenticate(self, header: Any, request: SaslAuthenticateRequest) -> None:
        assert self.server is not None
        try:
            challenge = self.server.evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as e:
            self._fail(header, str(e))
            return
        except SaslError as e:
            message = ("Authentication failed during authentication due to invalid credentials with SASL "
                       f"mechanism {self.server.mechanism}")
            self._fail(header, message, detail=str(e))
            return
        if self.server.complete and (changed := self._principal_changed()) is not None:
            self._fail(header, changed)
            return
        lifetime_ms = self._session_lifetime_ms() if self.server.complete else 0
        self._respond(header, SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=challenge,
                                                       session_lifetime_ms=lifetime_ms))
        self._check_complete()

    def _raw_token(self, token: bytes) -> None:
        assert self.server is not None
        try:
            challenge = self.server.evaluate(token)
        except (SaslAuthenticationError, SaslError) as e:
            self._fail(None, str(e))
            return
        if self.server.complete:
            if (changed := self._principal_changed()) is not None:
                self._fail(None, changed)
                return
            self._session_lifetime_ms()
        self.conn.send_now([len(challenge).to_bytes(4, "big"), challenge])
        self._check_complete()

    def _principal_changed(self) -> str | None:
        """Kafka's ensurePrincipalUnchanged: a re-authentication keeps the principal."""
        assert self.server is not None
        principal = f"User:{self.server.authorization_id}"
        if self.previous is None or self.previous[1] == principal:
            return None
        before = self.previous[1].replace(":", ".", 1)
        return (f"Cannot change principals during re-authentication from {before}: "
                f"{principal.replace(':', '.', 1)}")

    def _session_lifetime_ms(self) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs (no credential here expires):
        the mechanism's connections.max.reauth.ms, from now; 0 and no expiry when unset."""
        assert self.server is not None
        lifetime_ms = max(0, self._max_reauth_ms(self.server.mechanism))
        self.session_expiration = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else None
        return lifetime_ms

    def _check_complete(self) -> None:
        assert self.server is not None
        if self.server.complete:
            self.state = COMPLETE
            self.conn.principal = f"User:{self.server.authorization_id}"
            event = "re-authenticated SASL client" if self.previous is not None else "authenticated SASL client"
            self.previous = None
            log.info(event, peer=self.conn.peer, listener=self.conn.listener.name,
                     mechanism=self.server.mechanism, principal=self.conn.principal)

    def _close_after_answer(self) -> None:
        """A refusal is answered: close when the client does (its EOF closes the connection), or
        after FAILED_ANSWER_LINGER_S; frames that arrive meanwhile are ignored (FAILED)."""
        self.state = FAILED
        asyncio.get_running_loop().call_later(FAILED_ANSWER_LINGER_S, self.conn.close)

    def _fail(self, header: Any, message: str, detail: str | None = None) -> None:
        """Answer (v1) and close after the failed-authentication delay; read nothing more."""
        self.state = FAILED
        assert self.server is not None
        log.info("Failed authentication", peer=self.conn.peer, listener=self.conn.listener.name,
                 mechanism=self.server.mechanism, error=message, detail=detail)

        def close() -> None:
            if self.conn.closed:
                return
            if header is None:
                self.conn.close()
                return
            self._respond(header, SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b""))
            self._close_after_answer()

        if self.failed_delay_s > 0:
            asyncio.get_running_loop().call_later(self.failed_delay_s, close)
        else:
            close()
