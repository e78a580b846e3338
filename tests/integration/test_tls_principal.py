"""The principal a request handler sees (RequestContext.principal, the authorizer's input for
issue #23's ACLs), read from a real broker in this process over real TCP: User:ANONYMOUS on
PLAINTEXT and on TLS without a client certificate (ssl.client.auth=requested), the mapped
certificate subject with one."""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

from broker.config import KafkaConfig
from broker.context import RequestContext
from broker.server import BrokerServer
from protocol.framing import encode_request_frame
from protocol.messages import ApiVersionsRequest, RequestHeader
from tests.tls_certs import CertificateAuthority


async def api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request answered: the connection is set up on the broker's side."""
    writer.write(encode_request_frame(18, 3, 1, "t", ApiVersionsRequest(client_software_name="t",
                                                                         client_software_version="1")))
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    await reader.readexactly(size)


async def test_request_context_principal_per_connection(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "certs")
    server_pem = ca.issue("broker", "broker").pem_file()
    client = ca.issue("app", "app7", server=False, ou="ops")
    cfg = KafkaConfig({
        "log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_file()),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z0-9]+),OU=([a-z]+),.*$/$2:$1/"})
    server = BrokerServer(cfg)
    await server.startup()
    try:
        plain_port, ssl_port = (s.sockets[0].getsockname()[1] for s in server.servers)
        anonymous_tls = ssl.create_default_context(cafile=str(ca.ca_file()))
        with_cert = ssl.create_default_context(cafile=str(ca.ca_file()))
        with_cert.load_cert_chain(str(client.cert_file()), str(client.key_file()))
        conns = {
            "plaintext": await asyncio.open_connection("127.0.0.1", plain_port),
            "tls": await asyncio.open_connection("127.0.0.1", ssl_port, ssl=anonymous_tls,
                                                 server_hostname="127.0.0.1"),
            "mtls": await asyncio.open_connection("127.0.0.1", ssl_port, ssl=with_cert, server_hostname="127.0.0.1"),
        }
        try:
            principals = {}
            for name, (reader, writer) in conns.items():
                await api_versions(reader, writer)
                host, port = writer.get_extra_info("sockname")[:2]
                (conn,) = [c for c in server.connections if c.peer == f"{host}:{port}"]
                ctx = RequestContext(server, conn, RequestHeader(request_api_key=18, request_api_version=3,
                                                                 correlation_id=1, client_id="t"))
                principals[name] = ctx.principal
            assert principals == {"plaintext": "User:ANONYMOUS", "tls": "User:ANONYMOUS", "mtls": "User:ops:app7"}
        finally:
            for _, writer in conns.values():
                writer.close()
    finally:
        await server.shutdown()
