"""Large fetches over TLS, where sendfile cannot be used (broker/network.py reads the segment in
chunks in the executor and writes them through the TLS transport): the responses come back in
request order, byte for byte as on disk, interleaved with small ones; and clients that pipeline
large fetches and never read keep the broker's memory bounded, as over PLAINTEXT
(tests/integration/test_connection_bounds.py, whose helpers these tests use)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess, free_port
from tests.integration.test_connection_bounds import (
    assert_stalled_readers_bounded,
    assert_streamed_fetches_in_order,
    fill_topic,
)
from tests.tls_certs import CertificateAuthority


class TlsBroker:
    def __init__(self, broker: BrokerProcess, ssl_port: int, ca: CertificateAuthority) -> None:
        self.broker, self.ssl_port = broker, ssl_port
        self.context = ssl.create_default_context(cafile=str(ca.ca_file()))

    def connect(self, rcvbuf: int | None = None) -> ssl.SSLSocket:
        s = socket.socket()
        if rcvbuf is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(10)
        s.connect(("127.0.0.1", self.ssl_port))
        return self.context.wrap_socket(s, server_hostname="127.0.0.1")


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[TlsBroker]:
    ca = CertificateAuthority(tmp_path / "certs")
    pem = ca.issue("broker", "broker").pem_file()
    plain, ssl_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain,
                      listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
                      overrides=["ssl.keystore.type=PEM", f"ssl.keystore.location={pem}"]).start()
    try:
        yield TlsBroker(b, ssl_port, ca)
    finally:
        b.stop()


def test_streamed_fetch_over_tls_is_byte_exact_and_in_request_order(tls: TlsBroker) -> None:
    fill_topic(tls.broker)
    with tls.connect() as s:
        assert_streamed_fetches_in_order(tls.broker, s)


def test_tls_clients_that_never_read_pipelined_fetches_keep_broker_rss_bounded(tls: TlsBroker) -> None:
    """3 TLS connections x 64 pipelined 4 MB fetches, never read: at most a chunk and the
    transport's buffer each are held, not the 768 MB asked for."""
    fill_topic(tls.broker)
    assert_stalled_readers_bounded(tls.broker, lambda: tls.connect(rcvbuf=64 * 1024))
