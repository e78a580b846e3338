"""Large fetches over TLS, where sendfile cannot be used (broker/network.py reads the segment in
chunks in the executor and writes them through the TLS transport): the responses come back in
request order, byte for byte as on disk, interleaved with small ones; and clients that pipeline
large fetches and never read keep the broker's memory bounded, as over PLAINTEXT
(tests/integration/test_connection_bounds.py, whose helpers these tests use)."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.framing import decode_response
from tests.broker_process import BrokerProcess, free_port
from tests.integration.test_connection_bounds import (
    BATCH_VALUE,
    BATCHES,
    TOPIC,
    api_versions_frame,
    api_versions_ok,
    fetch_frame,
    fill_topic,
    recv_exact,
    rss_bytes,
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
    seg = next((tls.broker.log_dir / f"{TOPIC}-0").glob("*.log")).read_bytes()
    with tls.connect() as s:
        frames = []
        for i in range(12):
            frames.append(fetch_frame(2 * i, offset=i % BATCHES) if i % 3 else api_versions_frame(2 * i))
            frames.append(api_versions_frame(2 * i + 1))
        s.sendall(b"".join(frames))
        for corr in range(24):
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            data = recv_exact(s, size)
            assert struct.unpack_from(">i", data)[0] == corr
            i = corr // 2
            if corr % 2 or not i % 3:
                assert decode_response(data, 18, 3)[1].error_code == 0
                continue
            part = decode_response(data, 1, 12)[1].responses[0].partitions[0]
            assert part.error_code == 0
            records = bytes(part.records)
            start = seg.index(records[:61])
            assert records == seg[start:start + len(records)]
            assert len(records) >= BATCH_VALUE  # a streamed (large) response: file chunks through TLS
            assert struct.unpack_from(">q", records)[0] == i % BATCHES


def test_tls_clients_that_never_read_pipelined_fetches_keep_broker_rss_bounded(tls: TlsBroker) -> None:
    """3 TLS connections x 64 pipelined 4 MB fetches, never read: at most a chunk and the
    transport's buffer each are held, not the 768 MB asked for."""
    fill_topic(tls.broker)
    base = rss_bytes(tls.broker)
    socks = [tls.connect(rcvbuf=64 * 1024) for _ in range(3)]
    try:
        for s in socks:
            s.sendall(b"".join(fetch_frame(i) for i in range(64)))
        assert api_versions_ok(tls.broker)  # the broker still serves others
        limit = base + 100 * 1024 * 1024
        peak = base
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and peak <= limit:  # bounded poll: growth shows within 4 s
            peak = max(peak, rss_bytes(tls.broker))
            time.sleep(0.1)
        assert peak <= limit, f"RSS grew from {base >> 20} MiB to {peak >> 20} MiB"
        s = socks[0]  # served once it reads: the first response whole and right
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr, body = decode_response(recv_exact(s, size), 1, 12)
        assert corr == 0 and body.responses[0].partitions[0].error_code == 0
    finally:
        for s in socks:
            s.close()
