"""Kafka 3.9.2 and Odradek in one ZooKeeper-mode cluster (same chroot) accept each other's SCRAM
users: alice is created through Odradek (kafka-configs --bootstrap-server to Odradek, which is
the controller: its AlterUserScramCredentials writes /config/users/alice), bob by Kafka's own
code (kafka-configs --zookeeper); both authenticate with SCRAM-SHA-256 on both brokers' SASL
listeners, and a wrong password fails on both."""

from __future__ import annotations

from pathlib import Path

from tests.broker_process import free_port
from tests.compat.jvm import run_tool
from tests.compat.test_zk_znodes import ZkModeKafka
from tests.security.test_scram_zookeeper import (
    CONFIG_COMMAND,
    SCRAM_JAAS,
    authenticates,
    scram_broker,
)
from tests.zookeeper import ZooKeeperServer


def test_kafka_and_odradek_accept_each_others_scram_users(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    zk = zookeeper.connect_string("/mixed")
    ours, plain, sasl = scram_broker(tmp_path / "odradek", zk, "SCRAM-SHA-256")
    kafka_sasl = free_port()
    kafka = ZkModeKafka(tmp_path / "kafka", zk, broker_id=2, overrides={})
    kafka.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{kafka_sasl}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS})
    try:
        kafka.start()
        run_tool(CONFIG_COMMAND, "--bootstrap-server", f"127.0.0.1:{plain}", "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users",
                 "--entity-name", "alice")
        run_tool(CONFIG_COMMAND, "--zookeeper", zk, "--alter", "--add-config",
                 "SCRAM-SHA-256=[password=bob-secret]", "--entity-type", "users", "--entity-name", "bob")
        for port in (sasl, kafka_sasl):
            for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
                err = authenticates(f"127.0.0.1:{port}", "SCRAM-SHA-256", user, password, timeout=30)
                assert err is None, (port, user, err)
            wrong = authenticates(f"127.0.0.1:{port}", "SCRAM-SHA-256", "alice", "bob-secret", timeout=5)
            assert wrong is not None and ("Authentication failed during authentication due to invalid credentials "
                                          "with SASL mechanism SCRAM-SHA-256") in wrong.str(), (port, wrong)
    finally:
        kafka.stop()
        ours.stop()
