"""The principal of a SASL connection is `User:<username>`, and the authorizer checks it: alice,
authenticated with SASL/PLAIN, cannot produce to a topic until kafka-acls (Kafka 3.9.2, over the
PLAINTEXT admin listener) grants User:alice WRITE on it; bob, without an ACL, still cannot."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess, free_port
from tests.integration.test_sasl_clients import jaas
from tests.security.acl_tools import AUTHORIZER, acls

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def produce_error(bootstrap: str, user: str) -> KafkaError | None:
    """The delivery error of one record produced as `user` (None: delivered)."""
    results: list[KafkaError | None] = []

    def delivered(err: KafkaError | None, _: Message) -> None:
        results.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": user, "sasl.password": USERS[user], "message.timeout.ms": 10000,
                  "retries": 0})
    p.produce("guarded", b"v", on_delivery=delivered)
    p.flush(30)
    assert len(results) == 1
    return results[0]


def test_sasl_principal_is_authorized_by_acls(tmp_path: Path) -> None:
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data", port=plain,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        overrides=[AUTHORIZER, "super.users=User:ANONYMOUS", "sasl.enabled.mechanisms=PLAIN",
                   f"sasl.jaas.config={jaas('admin', USERS['admin'], USERS)}"]).start()
    bootstrap = f"127.0.0.1:{sasl}"
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(30)
        err = produce_error(bootstrap, "alice")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        acls(f"127.0.0.1:{plain}", "--add", "--allow-principal", "User:alice", "--operation", "Write",
             "--operation", "Describe", "--topic", "guarded")
        deadline = time.monotonic() + 20
        while (err := produce_error(bootstrap, "alice")) is not None:
            assert time.monotonic() < deadline, f"alice still refused: {err}"
        err = produce_error(bootstrap, "bob")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        broker.stop()
