"""The TLS handshake of an SSL listener's connection, run by the broker so that a failed one is
logged, as Kafka's Selector does: `Failed authentication with /<ip> (SSL handshake failed)` at
INFO, here with the peer's address and port, the listener and OpenSSL's reason (an untrusted
or missing client certificate under `ssl.client.auth=required`, a protocol outside
`ssl.enabled.protocols`, a client speaking plain text to the TLS port).

Why not `create_server(ssl=...)`: asyncio (and uvloop) run that handshake inside the transport
and drop its failure silently (an OSError is only logged in the loop's debug mode); the
operator of a broker whose clients cannot connect would see nothing. So the listener accepts
TCP and this protocol upgrades each connection with `loop.start_tls` (the same SSLProtocol
underneath), then hands the TLS transport to the Kafka connection: `connection_made` of the
KafkaConnection still comes only once the handshake is done.

Who may call: the event loop (the listener's protocol factory).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import structlog

from broker.background import BackgroundTasks

__all__ = ["TlsHandshake"]

log = structlog.get_logger("odradek.tls")

# asyncio's default: a client that starts a handshake and stalls is dropped after this long
HANDSHAKE_TIMEOUT_S = 60.0


class TlsHandshake(asyncio.Protocol):
    """The protocol of an accepted TCP connection until its TLS handshake ends; then `app`
    (the KafkaConnection) owns the TLS transport."""

    def __init__(self, app: asyncio.Protocol, context: ssl.SSLContext, listener: str,
                 tasks: BackgroundTasks) -> None:
        self.app = app
        self.context = context
        self.listener = listener
        self.tasks = tasks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # start_tls pauses reading before it hands the socket to the SSL protocol; pausing here
        # already would be undone by uvloop, which starts reading after connection_made
        self.transport = transport
        self.early: list[bytes] = []
        self.tasks.spawn(self._handshake(transport))

    async def _handshake(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        loop = asyncio.get_running_loop()
        # runs after start_tls has given the socket to the SSL protocol and before that protocol
        # starts its handshake: the bytes read so far go first into its incoming buffer
        loop.call_soon(self._flush_early)
        try:
            tls_transport = await loop.start_tls(
                transport, self.app, self.context, server_side=True,  # type: ignore[arg-type]
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (OSError, TimeoutError, ConnectionError, RuntimeError) as e:
            # RuntimeError: the peer went away before the handshake could start
            ip = peer[0] if peer else "?"
            log.info(f"Failed authentication with /{ip} (SSL handshake failed)",
                     peer=f"{ip}:{peer[1]}" if peer else "?", listener=self.listener, reason=_reason(e))
            transport.abort()  # type: ignore[attr-defined]
            return
        self.app.connection_made(tls_transport)

    def data_received(self, data: bytes) -> None:
        """Bytes read before start_tls took the socket over (the ClientHello, when it came in
        the loop iteration between connection_made and the handshake task's first step):
        kept for the SSL protocol."""
        self.early.append(data)

    def _flush_early(self) -> None:
        proto = self.transport.get_protocol()
        if proto is self:  # start_tls refused the transport: the handshake task logs it
            return
        for data in self.early:
            _feed(proto, data)  # type: ignore[arg-type]
        self.early.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        pass  # before start_tls: the handshake task sees the closed transport and logs it


def _feed(proto: asyncio.BufferedProtocol, data: bytes) -> None:
    """`data` into a buffered protocol (the SSL protocol), as its transport would."""
    view = memoryview(data)
    while view:
        buf = memoryview(proto.get_buffer(len(view)))
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        proto.buffer_updated(n)
        view = view[n:]


def _reason(e: BaseException) -> Any:
    """OpenSSL's words (`[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca`), else the
    exception's."""
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, TimeoutError):
        return f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    return str(e) or type(e).__name__
