"""A failed TLS handshake is logged once, as Kafka's Selector logs it ("Failed authentication
with /<ip> (SSL handshake failed)" at INFO), with the client's address and port and OpenSSL's
reason; a good handshake is not. A real broker in this process, real TLS clients over TCP:
a certificate from a CA the broker does not trust (ssl.client.auth=required), a client that
offers only TLS 1.2 to a listener with ssl.enabled.protocols=TLSv1.3, and plain text to the TLS
port."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from broker.config import KafkaConfig
from broker.server import BrokerServer
from tests.integration.test_tls_principal import api_versions
from tests.tls_certs import CertificateAuthority

FAILED = "Failed authentication with /127.0.0.1 (SSL handshake failed)"


async def _failed_lines(logs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The handshake failure lines once there are `n` of them (bounded wait: the broker logs
    after the client has seen its own failure)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [e for e in logs if e["event"].startswith("Failed authentication")]
        if len(lines) >= n:
            return lines
        await asyncio.sleep(0.02)
    return [e for e in logs if e["event"].startswith("Failed authentication")]


async def test_failed_handshakes_are_logged_with_peer_and_reason(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    stranger = CertificateAuthority(tmp_path / "stranger", cn="Untrusted CA")
    server_pem = ca.issue("broker", "broker").pem_file()
    good, bad = ca.issue("app", "app", server=False), stranger.issue("intruder", "intruder", server=False)
    cfg = KafkaConfig({
        "log.dirs": str(tmp_path / "data"), "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_file()),
        "ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3"})
    server = BrokerServer(cfg)
    await server.startup()
    try:
        (port,) = (s.sockets[0].getsockname()[1] for s in server.servers)

        def client(identity: Any, version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3) -> ssl.SSLContext:
            ctx = ssl.create_default_context(cafile=str(ca.ca_file()))
            ctx.load_cert_chain(str(identity.cert_file()), str(identity.key_file()))
            ctx.maximum_version = version
            return ctx

        with capture_logs() as logs:
            # a trusted client is served and not logged as a failure
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client(good),
                                                          server_hostname="127.0.0.1")
            await api_versions(reader, writer)
            writer.close()
            failures: list[tuple[str, int]] = []
            for what, ctx in (("untrusted", client(bad)), ("protocol", client(good, ssl.TLSVersion.TLSv1_2))):
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                                  server_hostname="127.0.0.1")
                    local_port = writer.get_extra_info("sockname")[1]
                    # TLS 1.3: the client finishes before the server checks its certificate;
                    # the broker's refusal arrives as the first read's error or EOF
                    await api_versions(reader, writer)
                    raise AssertionError(f"{what}: the broker answered")
                except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError) as e:
                    failures.append((what, getattr(e, "reason", None) or str(e)))
                    if what == "untrusted":
                        failures[-1] = (what, local_port)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x00\x00\x00\x10plain text here!")
            await writer.drain()
            assert await reader.read() == b""  # the broker closes the connection
            plain_port = writer.get_extra_info("sockname")[1]
            writer.close()
            lines = await _failed_lines(logs, 3)
        assert [e["event"] for e in lines] == [FAILED] * 3, lines
        assert all(e["log_level"] == "info" and e["listener"] == "SSL" for e in lines)
        by_peer = {e["peer"]: e["reason"] for e in lines}
        assert by_peer[f"127.0.0.1:{failures[0][1]}"] in ("TLSV1_ALERT_UNKNOWN_CA", "CERTIFICATE_VERIFY_FAILED"), lines
        assert by_peer[f"127.0.0.1:{plain_port}"] in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"), lines
        assert sorted(e["reason"] for e in lines).count("UNSUPPORTED_PROTOCOL") == 1, lines
    finally:
        await server.shutdown()
