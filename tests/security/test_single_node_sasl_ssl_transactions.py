"""A single node whose only listener is SASL_SSL runs transactions (issue #23 §2): its transaction
marker sender reaches the node itself on that listener with TLS (the listener's truststore) and
SASL (`sasl.mechanism.inter.broker.protocol` and the listener's JAAS username / password), as a
cluster's brokers reach each other. Without them the markers never land: the last stable offset
stays before the transaction and a read_committed consumer reads nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import rdkafka_read
from tests.integration.test_python_transactions import SINGLE_BROKER_TXN
from tests.integration.test_sasl_clients import jaas
from tests.tls_certs import PASSWORD, CertificateAuthority

USERS = {"broker": "broker-secret", "alice": "alice-secret"}


class Node:
    def __init__(self, broker: BrokerProcess, ca: CertificateAuthority, port: int) -> None:
        self.broker = broker
        self.conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                     "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"],
                     "ssl.ca.location": str(ca.ca_file())}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", "broker0")
    port = free_port()
    # inter.broker.listener.name is left unset: its default (PLAINTEXT) is not a listener here,
    # so the node's own connections use its first advertised listener, SASL_SSL
    broker = BrokerProcess(
        tmp_path / "data", port=port, listeners=f"SASL_SSL://127.0.0.1:{port}",
        overrides=[
            *SINGLE_BROKER_TXN, "num.partitions=1",
            "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"sasl.jaas.config={jaas('broker', USERS['broker'], USERS)}",
            "ssl.keystore.type=PKCS12", f"ssl.keystore.location={server.pkcs12_file()}",
            f"ssl.keystore.password={PASSWORD}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={ca.ca_file()}",
        ]).start()
    try:
        yield Node(broker, ca, port)
    finally:
        broker.stop()


def test_transactions_commit_on_a_sasl_ssl_only_node(node: Node) -> None:
    topic = "txn-sasl-ssl"
    admin = AdminClient(node.conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(node.conf | {"transactional.id": "txn-sasl-ssl-1", "linger.ms": 5})
    producer.init_transactions(30)
    values = [f"committed-{i}".encode() for i in range(20)]
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v)
    producer.commit_transaction(30)
    # read_committed sees the records only after the COMMIT marker is written on the partition
    got = rdkafka_read(node.conf, topic, len(values), {"isolation.level": "read_committed"})
    assert got == values
    # the marker came over the SASL_SSL listener, authenticated as the broker's own user
    own = [line for line in node.broker.lines
           if "authenticated SASL client" in line and "principal='User:broker'" in line]
    assert own and all("listener='SASL_SSL'" in line for line in own), own
