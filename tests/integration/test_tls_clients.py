"""SSL listeners against real clients: confluent-kafka (librdkafka), kafka-python, aiokafka, kcat
and Kafka 3.9's Java console producer and consumer, each producing and consuming over TLS with
the broker's certificate verified (hostname included) against the test CA; and mutual TLS on a
second SSL listener (`ssl.client.auth=required` for that listener only), where a client without
a certificate is refused and one with a certificate gets the principal the mapping rules give.

One broker serves the module, with three listeners: PLAINTEXT (admin), SSL (a PKCS12 keystore,
server authentication only) and MTLS (mapped to SSL; per-listener overrides: an inline PEM
keystore, a PEM truststore, client auth required, principal mapping rules)."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import (
    aiokafka_round_trip,
    kafka_python_round_trip,
    rdkafka_round_trip,
)
from tests.compat.jvm import run_tool
from tests.tls_certs import PASSWORD, CertificateAuthority, Identity

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
MAPPING = "RULE:^CN=([a-z0-9]+),OU=([a-z]+),.*$/$1@$2/U,DEFAULT"


class TlsBroker:
    def __init__(self, broker: BrokerProcess, ca: CertificateAuthority, ssl_port: int, mtls_port: int,
                 client: Identity, stranger: Identity) -> None:
        self.broker = broker
        self.ca = ca
        self.ssl = f"127.0.0.1:{ssl_port}"
        self.mtls = f"127.0.0.1:{mtls_port}"
        self.client = client  # CN=app1,OU=eng: mapped by the rule
        self.stranger = stranger  # no OU: falls through to DEFAULT

    def rdkafka(self, bootstrap: str, identity: Identity | None = None) -> dict[str, str]:
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca.ca_file()), "ssl.endpoint.identification.algorithm": "https"}
        if identity is not None:
            conf |= {"ssl.certificate.location": str(identity.cert_file()),
                     "ssl.key.location": str(identity.key_file())}
        return conf


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    root = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(root / "certs")
    server = ca.issue("broker", "broker0")
    mtls_server = ca.issue("broker-mtls", "broker0-mtls")
    plain, ssl_port, mtls_port = free_port(), free_port(), free_port()
    broker = BrokerProcess(
        root / "data", port=plain,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        overrides=[
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "num.partitions=1", "group.initial.rebalance.delay.ms=0",
            "ssl.keystore.type=PKCS12", f"ssl.keystore.location={server.pkcs12_file()}",
            f"ssl.keystore.password={PASSWORD}",
            "listener.name.mtls.ssl.keystore.type=PEM",
            f"listener.name.mtls.ssl.keystore.certificate.chain={mtls_server.cert_pem}",
            f"listener.name.mtls.ssl.keystore.key={mtls_server.key_pem(PASSWORD)}",
            f"listener.name.mtls.ssl.key.password={PASSWORD}",
            "listener.name.mtls.ssl.truststore.type=PEM",
            f"listener.name.mtls.ssl.truststore.location={ca.ca_file()}",
            "listener.name.mtls.ssl.client.auth=required",
            f"listener.name.mtls.ssl.principal.mapping.rules={MAPPING}",
        ]).start()
    try:
        yield TlsBroker(broker, ca, ssl_port, mtls_port, ca.issue("app1", "app1", server=False, ou="eng"),
                        ca.issue("stranger", "stranger", server=False))
    finally:
        broker.stop()


def create_topic(tls: TlsBroker, name: str) -> None:
    admin = AdminClient(tls.rdkafka(tls.ssl))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def payloads(n: int, size: int) -> list[bytes]:
    return [hashlib.sha256(str(i).encode()).hexdigest().encode() * (size // 64) for i in range(n)]


def test_confluent_kafka_produces_and_consumes_over_ssl(tls: TlsBroker) -> None:
    """4 MB in 16 KB records: fetch responses far above the streaming threshold, sent as file
    regions read in chunks through the TLS transport (sendfile would put plaintext on the wire
    and the client would fail the record CRCs or the TLS records)."""
    create_topic(tls, "tls-rdkafka")
    values = payloads(256, 16384)
    big_fetches = {"fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20}
    assert rdkafka_round_trip(tls.rdkafka(tls.ssl), "tls-rdkafka", values, big_fetches) == values


def test_kafka_python_over_ssl(tls: TlsBroker) -> None:
    create_topic(tls, "tls-kafka-python")
    values = payloads(50, 4096)
    common = {"bootstrap_servers": tls.ssl, "security_protocol": "SSL", "ssl_cafile": str(tls.ca.ca_file()),
              "ssl_check_hostname": True}
    assert kafka_python_round_trip(common, "tls-kafka-python", values) == values


def test_aiokafka_over_ssl(tls: TlsBroker) -> None:
    from aiokafka.helpers import create_ssl_context

    create_topic(tls, "tls-aiokafka")
    values = payloads(50, 4096)
    common = {"bootstrap_servers": tls.ssl, "security_protocol": "SSL",
              "ssl_context": create_ssl_context(cafile=str(tls.ca.ca_file()))}
    assert aiokafka_round_trip(common, "tls-aiokafka", values) == values


def test_kcat_over_ssl(tls: TlsBroker) -> None:
    create_topic(tls, "tls-kcat")
    ssl_args = ["-b", tls.ssl, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={tls.ca.ca_file()}"]
    lines = [f"kcat-{i}-{'z' * 100}" for i in range(100)]
    subprocess.run(["kcat", *ssl_args, "-P", "-t", "tls-kcat"], input="\n".join(lines) + "\n", text=True,
                   check=True, timeout=60, capture_output=True)
    out = subprocess.run(["kcat", *ssl_args, "-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q"],
                         text=True, check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines


def test_java_console_producer_and_consumer_over_ssl(tls: TlsBroker, tmp_path: Path) -> None:
    """Kafka 3.9's tools over SSL with a client config file (security.protocol=SSL, a PKCS12
    truststore made by keytool; Java verifies the broker's SAN, ssl.endpoint.identification.algorithm
    =https): kafka-topics with --command-config creates the topic, the console producer and
    consumer (which take it as --producer.config / --consumer.config in 3.9) write and read it."""
    config = tmp_path / "client-ssl.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PKCS12\n"
                      f"ssl.truststore.location={tls.ca.java_truststore()}\nssl.truststore.password={PASSWORD}\n")
    out = run_tool(TOPICS, "--bootstrap-server", tls.ssl, "--command-config", str(config), "--create",
                   "--topic", "tls-java", "--partitions", "1", "--replication-factor", "1").stdout
    assert out.strip() == "Created topic tls-java."
    lines = [f"java-{i}" for i in range(20)]
    run_tool(CONSOLE_PRODUCER, "--bootstrap-server", tls.ssl, "--topic", "tls-java", "--sync",
             "--producer.config", str(config), input="\n".join(lines) + "\n")
    out = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", tls.ssl, "--topic", "tls-java", "--from-beginning",
                   "--max-messages", str(len(lines)), "--timeout-ms", "30000",
                   "--consumer.config", str(config)).stdout
    assert out.splitlines() == lines


def test_mtls_refuses_a_client_without_certificate(tls: TlsBroker) -> None:
    admin = AdminClient(tls.rdkafka(tls.mtls))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    # the same client with a certificate signed by the CA gets in
    assert AdminClient(tls.rdkafka(tls.mtls, tls.client)).list_topics(timeout=30).brokers


def test_mtls_client_gets_the_mapped_principal(tls: TlsBroker) -> None:
    """The rule maps CN=app1,OU=eng,... to APP1@ENG (U: upper case); a subject the rule does
    not match falls through to DEFAULT, the whole subject in RFC 2253 order."""
    create_topic(tls, "tls-mtls")
    after = len(tls.broker.lines)
    values = payloads(20, 1024)
    assert rdkafka_round_trip(tls.rdkafka(tls.mtls, tls.client), "tls-mtls", values) == values
    line = tls.broker.wait_for_line("authenticated TLS client", after=after)
    assert "principal='User:APP1@ENG'" in line and "listener='MTLS'" in line
    after = len(tls.broker.lines)
    AdminClient(tls.rdkafka(tls.mtls, tls.stranger)).list_topics(timeout=30)
    line = tls.broker.wait_for_line("authenticated TLS client", after=after)
    assert "principal='User:CN=stranger,O=Odradek Tests,C=US'" in line


def test_ssl_listener_without_client_auth_is_anonymous(tls: TlsBroker) -> None:
    """A certificate offered to a listener with ssl.client.auth=none is not asked for: no
    principal line (ANONYMOUS)."""
    after = len(tls.broker.lines)
    AdminClient(tls.rdkafka(tls.ssl, tls.client)).list_topics(timeout=30)
    AdminClient(tls.rdkafka(tls.mtls, tls.client)).list_topics(timeout=30)
    tls.broker.wait_for_line("authenticated TLS client", after=after)  # the MTLS one
    lines = [line for line in tls.broker.lines[after:] if "authenticated TLS client" in line]
    assert all("listener='MTLS'" in line for line in lines), lines
