"""The server side of SASL authentication on one connection, as Kafka's SaslServerAuthenticator.

States (Kafka's SaslState): HANDSHAKE_OR_VERSIONS_REQUEST -> (ApiVersions) HANDSHAKE_REQUEST ->
(SaslHandshake) AUTHENTICATE (v1: tokens framed in SaslAuthenticate requests) or RAW_TOKEN (v0:
bare size-prefixed tokens) -> COMPLETE, or FAILED. Before COMPLETE, ApiVersions is answered as
usual and any other request closes the connection (Kafka throws IllegalSaslStateException), so
nothing is served to an unauthenticated client. A handshake naming a mechanism the listener does
not enable is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones and the connection is
closed. A failed authentication is answered SASL_AUTHENTICATION_FAILED with Kafka's message (v1;
v0 gets no answer) after `connection.failed.authentication.delay.ms`, then the connection closes:
the delay slows down password guessing, as Kafka's delayed close does.

The connection (broker.network) hands every frame here until `complete`; `receive` answers the
SASL requests itself through `conn.send_now` and returns False for a frame the connection must
dispatch (ApiVersions)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.apis.registry import REGISTRY
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


class MechanismServer(Protocol):
    """A mechanism's server (Java's SaslServer): evaluate client tokens until complete."""

    mechanism: str
    complete: bool
    authorization_id: str | None

    def evaluate(self, response: bytes) -> bytes: ...


class SaslAuthenticator:
    def __init__(self, conn: KafkaConnection, mechanisms: list[str],
                 servers: Callable[[str], MechanismServer], failed_delay_s: float) -> None:
        self.conn = conn
        self.mechanisms = mechanisms
        self._servers = servers
        self.failed_delay_s = failed_delay_s
        self.state = HANDSHAKE_OR_VERSIONS
        self.server: MechanismServer | None = None

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

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
            self._respond(header, SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM,
                                                        mechanisms=list(self.mechanisms)))
            self.conn.abort("Unsupported SASL mechanism", mechanism=mechanism, enabled=self.mechanisms)
            return
        self.server = self._servers(mechanism)
        self._respond(header, SaslHandshakeResponse(error_code=0, mechanisms=list(self.mechanisms)))
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
        self._respond(header, SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=challenge,
                                                       session_lifetime_ms=0))
        self._check_complete()

    def _raw_token(self, token: bytes) -> None:
        assert self.server is not None
        try:
            challenge = self.server.evaluate(token)
        except (SaslAuthenticationError, SaslError) as e:
            self._fail(None, str(e))
            return
        self.conn.send_now([len(challenge).to_bytes(4, "big"), challenge])
        self._check_complete()

    def _check_complete(self) -> None:
        assert self.server is not None
        if self.server.complete:
            self.state = COMPLETE
            self.conn.principal = f"User:{self.server.authorization_id}"
            log.info("authenticated SASL client", peer=self.conn.peer, listener=self.conn.listener.name,
                     mechanism=self.server.mechanism, principal=self.conn.principal)

    def _fail(self, header: Any, message: str, detail: str | None = None) -> None:
        """Answer (v1) and close after the failed-authentication delay; read nothing more."""
        self.state = FAILED
        assert self.server is not None
        log.info("Failed authentication", peer=self.conn.peer, listener=self.conn.listener.name,
                 mechanism=self.server.mechanism, error=message, detail=detail)

        def close() -> None:
            if self.conn.closed:
                return
            if header is not None:
                self._respond(header, SaslAuthenticateResponse(
                    error_code=SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b""))
            self.conn.close()

        if self.failed_delay_s > 0:
            asyncio.get_running_loop().call_later(self.failed_delay_s, close)
        else:
            close()
