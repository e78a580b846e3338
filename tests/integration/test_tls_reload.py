"""Certificate reload without restart (issue #23 §1): Kafka 3.9's kafka-configs sets
`listener.name.ssl.ssl.keystore.location` on a ZooKeeper-mode broker; connections made afterwards
get the new certificate, one opened before keeps its session and goes on answering. A keystore
that cannot be loaded, or whose certificate names another subject (ssl.allow.dn.changes is
false), is refused by the AlterConfigs and nothing changes. Passwords are described as sensitive
(no value)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from protocol.messages import ApiVersionsRequest
from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

CONFIGS = "kafka.admin.ConfigCommand"


@pytest.fixture
def broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[tuple[BrokerProcess, CertificateAuthority, int]]:
    ca = CertificateAuthority(tmp_path / "certs")
    first = ca.issue("first", "broker1").pkcs12_file()
    plain, ssl_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, zookeeper_connect=zookeeper.connect_string("/tls"), broker_id=1,
                      listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
                      overrides=["offsets.topic.replication.factor=1", "ssl.keystore.type=PKCS12",
                                 f"ssl.keystore.location={first}", f"ssl.keystore.password={PASSWORD}"])
    b.start()
    try:
        yield b, ca, ssl_port
    finally:
        b.stop()


def tls_connection(ca: CertificateAuthority, port: int) -> tuple[RawConnection, x509.Certificate]:
    """A raw Kafka connection over TLS (the CA trusted, hostname checked); the certificate the
    broker presented."""
    conn = RawConnection(port)
    ctx = ssl.create_default_context(cafile=str(ca.ca_file()))
    conn.sock = ctx.wrap_socket(conn.sock, server_hostname="127.0.0.1")
    der = conn.sock.getpeercert(binary_form=True)
    assert der is not None
    return conn, x509.load_der_x509_certificate(der)


def answers(conn: RawConnection) -> bool:
    return conn.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code == 0


def alter(b: BrokerProcess, config: str, check: bool = True) -> str:
    proc = run_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
                    "--alter", "--add-config", config, check=check)
    return proc.stdout + proc.stderr


def test_keystore_reload_through_kafka_configs(broker: tuple[BrokerProcess, CertificateAuthority, int]) -> None:
    b, ca, port = broker
    old_conn, old_cert = tls_connection(ca, port)
    assert old_cert.subject.rfc4514_string().startswith("CN=broker1")
    second = ca.issue("second", "broker1")  # same subject and SANs, a new key and serial
    after = len(b.lines)
    alter(b, f"listener.name.ssl.ssl.keystore.location={second.pkcs12_file()}")
    b.wait_for_line("reloaded the listener's keystore", after=after)
    new_conn, new_cert = tls_connection(ca, port)
    try:
        assert new_cert.serial_number == second.cert.serial_number != old_cert.serial_number
        assert answers(new_conn)
        # the connection made before the reload keeps its session and is still served
        assert answers(old_conn)
        assert old_conn.sock.getpeercert(binary_form=True) == old_cert.public_bytes(Encoding.DER)
    finally:
        new_conn.close()
        old_conn.close()
    described = run_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
                         "--describe", "--all").stdout
    assert f"listener.name.ssl.ssl.keystore.location={second.dir / 'second.p12'}" in described
    assert "ssl.keystore.password=null sensitive=true" in described


def test_unusable_keystores_refused_by_alter_configs(broker: tuple[BrokerProcess, CertificateAuthority, int],
                                                     tmp_path: Path) -> None:
    b, ca, port = broker
    conn, before = tls_connection(ca, port)
    conn.close()
    out = alter(b, f"listener.name.ssl.ssl.keystore.location={tmp_path / 'missing.p12'}", check=False)
    assert "listener.name.ssl.ssl.keystore.location: cannot read it" in out, out
    other = ca.issue("other", "someone-else").pkcs12_file()
    out = alter(b, f"listener.name.ssl.ssl.keystore.location={other}", check=False)
    assert "Keystore DistinguishedName does not match" in out, out
    out = alter(b, "listener.name.ssl.ssl.keystore.password=x", check=False)
    assert "cannot be set dynamically" in out, out
    conn, after = tls_connection(ca, port)
    conn.close()
    assert after.serial_number == before.serial_number
