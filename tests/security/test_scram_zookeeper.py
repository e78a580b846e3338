"""SASL/SCRAM with credentials kept in ZooKeeper as Kafka 3.9 keeps them: Kafka 3.9.2's own
`kafka-configs.sh --zookeeper ... --entity-type users --add-config 'SCRAM-SHA-256=[...]'`
writes `/config/users/<user>` and a /config/changes notification while an Odradek broker runs;
the broker follows the notification, and confluent-kafka (librdkafka) authenticates with
SCRAM-SHA-256 and SCRAM-SHA-512 and produces and consumes. A wrong password gets Kafka's
message; a credential deleted through the tool stops authenticating."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.zookeeper import ZooKeeperServer

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";'


def authenticates(bootstrap: str, mechanism: str, user: str, password: str, timeout: float = 20) -> KafkaError | None:
    """None once a metadata request over SASL succeeds, else the last authentication error
    (retried until `timeout`: the broker learns of a new credential through a notification)."""
    deadline = time.monotonic() + timeout
    last: KafkaError | None = None
    while time.monotonic() < deadline:
        errors: list[KafkaError] = []
        admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                             "error_cb": errors.append, "retry.backoff.ms": 100})
        try:
            admin.list_topics(timeout=3)
            return None
        except Exception:
            admin.poll(0.5)
            last = next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), last)
    return last


def configs(zk: str, *args: str) -> str:
    return run_tool(CONFIG_COMMAND, "--zookeeper", zk, *args).stdout


def test_kafka_tool_written_scram_users_authenticate(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    zk = zookeeper.connect_string("/scram")
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data", port=plain, zookeeper_connect=zk, broker_id=1,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        overrides=["offsets.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0",
                   "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512", f"sasl.jaas.config={SCRAM_JAAS}"]).start()
    bootstrap = f"127.0.0.1:{sasl}"
    try:
        configs(zk, "--alter", "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-512]",
                "--entity-type", "users", "--entity-name", "alice")
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret") is None
        assert authenticates(bootstrap, "SCRAM-SHA-512", "alice", "alice-512") is None

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        admin.create_topics([NewTopic("scram-t", 1, 1)])["scram-t"].result(30)
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-512"}
        p = Producer(conf)
        values = [f"scram-{i}".encode() for i in range(50)]
        for v in values:
            p.produce("scram-t", v)
        assert p.flush(30) == 0
        c = Consumer(conf | {"group.id": "scram-g", "auto.offset.reset": "earliest"})
        got: list[bytes] = []
        try:
            c.subscribe(["scram-t"])
            deadline = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < deadline:
                m = c.poll(1)
                if m is not None and m.error() is None:
                    got.append(m.value())
        finally:
            c.close()
        assert got == values

        wrong = authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-512", timeout=5)
        assert wrong is not None
        assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-256") in wrong.str()
        # each mechanism has its own credential: bob exists for neither
        assert authenticates(bootstrap, "SCRAM-SHA-256", "bob", "alice-secret", timeout=5) is not None

        configs(zk, "--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "alice")
        deadline = time.monotonic() + 20
        while authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=3) is None:
            assert time.monotonic() < deadline, "the deleted credential still authenticates"
        assert authenticates(bootstrap, "SCRAM-SHA-512", "alice", "alice-512") is None
    finally:
        broker.stop()
