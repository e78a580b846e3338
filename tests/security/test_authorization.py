"""Requests checked against the ACLs, with real clients (confluent-kafka / librdkafka) over real
TCP, as User:ANONYMOUS (the PLAINTEXT principal): the ACLs are created while User:ANONYMOUS is a
super user, then the broker restarts without super.users and the same client is held to them.

* a producer without WRITE on its topic gets TOPIC_AUTHORIZATION_FAILED for its records;
* a consumer without READ on its group gets GROUP_AUTHORIZATION_FAILED;
* a PREFIXED ACL allows a topic whose name starts with the prefix;
* a DENY of READ on one name wins over the prefixed ALLOW ALL (the producer's WRITE stays allowed);
* Metadata lists only the topics the client may DESCRIBE.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.broker_process import BrokerProcess
from tests.security.acl_tools import AUTHORIZER

ANON = "User:ANONYMOUS"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def binding(kind: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = ALLOW,
            pattern: ResourcePatternType = LIT, principal: str = ANON) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", op, perm)


ACLS = [
    binding(ResourceType.BROKER, "kafka-cluster", AclOperation.ALL),  # may manage ACLs and create topics
    binding(ResourceType.TOPIC, "pre-", AclOperation.ALL, pattern=PRE),
    binding(ResourceType.TOPIC, "pre-denied", AclOperation.READ, DENY),
    binding(ResourceType.TOPIC, "secret", AclOperation.ALL, principal="User:alice"),
    binding(ResourceType.GROUP, "g-ok", AclOperation.READ),
]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides=[AUTHORIZER, "super.users=User:ANONYMOUS", "num.partitions=1"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("secret", "pre-x", "pre-denied")]).values():
            f.result(30)
        for f in admin.create_acls(ACLS).values():
            f.result(30)
    finally:
        b.stop()
    b = BrokerProcess(data, port=b.port, overrides=[AUTHORIZER, "num.partitions=1"]).start()
    try:
        yield b
    finally:
        b.stop()


def produce(bootstrap: str, topic: str) -> KafkaError | None:
    """One record; the delivery error (None when acknowledged)."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    outcome: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def consume(bootstrap: str, topic: str, group: str, timeout: float = 20.0) -> tuple[list[bytes], KafkaError | None]:
    """Subscribe and poll until a record or an error arrives (bounded)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return [], m.error()
            return [m.value()], None
        return [], None
    finally:
        c.close()


def test_acls_govern_real_clients(broker: BrokerProcess) -> None:
    err = produce(broker.bootstrap, "secret")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert produce(broker.bootstrap, "pre-x") is None  # the prefixed ALLOW
    assert produce(broker.bootstrap, "pre-denied") is None  # DENY is of READ only

    values, err = consume(broker.bootstrap, "pre-x", "g-ok")
    assert (values, err) == ([b"v"], None)
    _, err = consume(broker.bootstrap, "pre-x", f"g-no-{uuid.uuid4().hex[:6]}")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    _, err = consume(broker.bootstrap, "pre-denied", "g-ok")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    topics = set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics)
    assert {"pre-x", "pre-denied"} <= topics
    assert "secret" not in topics


def test_java_clients_see_kafkas_exceptions(broker: BrokerProcess) -> None:
    """Kafka 3.9.2's console producer and consumer (the Java clients) name the exceptions Kafka's
    own brokers make them throw: TopicAuthorizationException, GroupAuthorizationException."""
    from tests.compat.jvm import run_tool

    p = run_tool("kafka.tools.ConsoleProducer", "--bootstrap-server", broker.bootstrap, "--topic", "secret",
                 "--sync", "--producer-property", "max.block.ms=15000", input="v\n", check=False)
    assert "org.apache.kafka.common.errors.TopicAuthorizationException" in p.stdout + p.stderr, p.stderr[-2000:]
    c = run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", broker.bootstrap,
                 "--topic", "pre-x", "--group", "g-denied", "--from-beginning", "--timeout-ms", "15000",
                 check=False)
    assert "org.apache.kafka.common.errors.GroupAuthorizationException" in c.stdout + c.stderr, c.stderr[-2000:]
    assert produce(broker.bootstrap, "pre-x") is None
    ok = run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", broker.bootstrap,
                  "--topic", "pre-x", "--group", "g-ok", "--from-beginning", "--max-messages", "1",
                  "--timeout-ms", "20000", check=False)
    assert (ok.stdout, "Processed a total of 1 messages" in ok.stderr) == ("v\n", True), ok.stderr[-2000:]
