"""SASL/SCRAM with credentials kept in ZooKeeper as Kafka 3.9 keeps them: Kafka 3.9.2's own
`kafka-configs.sh --zookeeper ... --entity-type users --add-config 'SCRAM-SHA-256=[...]'`
writes `/config/users/<user>` and a /config/changes notification while an Odradek broker runs;
the broker follows the notification, and confluent-kafka (librdkafka) authenticates with
SCRAM-SHA-256 and SCRAM-SHA-512 and produces and consumes. A wrong password gets Kafka's
message; a credential deleted through the tool stops authenticating."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from protocol.messages import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.messages.describe_user_scram_credentials_request import UserName
from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import rdkafka_round_trip
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.security.scram_broker import BROKER_JAAS, CONFIG_COMMAND
from tests.zookeeper import ZooKeeperServer

SCRAM_JAAS = BROKER_JAAS


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


def describe(port: int, *users: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """DescribeUserScramCredentials v0: (error, [(mechanism type, iterations)]) per user."""
    with RawConnection(port) as c:
        resp = c.call(50, 0, DescribeUserScramCredentialsRequest(users=[UserName(name=u) for u in users] or None))
    assert resp.error_code == 0
    return [(r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos]) for r in resp.results]


def configs(zk: str, *args: str) -> str:
    return run_tool(CONFIG_COMMAND, "--zookeeper", zk, *args).stdout


def scram_broker(data: Path, zk: str, mechanisms: str, *overrides: str) -> tuple[BrokerProcess, int, int]:
    """A started broker (id 1) with a PLAINTEXT listener and a SASL_PLAINTEXT one that accepts
    `mechanisms` against the SCRAM credentials in ZooKeeper: it and its two ports."""
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(
        data, port=plain, zookeeper_connect=zk, broker_id=1,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        overrides=["offsets.topic.replication.factor=1", *overrides,
                   f"sasl.enabled.mechanisms={mechanisms}", f"sasl.jaas.config={SCRAM_JAAS}"]).start()
    return broker, plain, sasl


def test_kafka_tool_written_scram_users_authenticate(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    zk = zookeeper.connect_string("/scram")
    broker, plain, sasl = scram_broker(tmp_path / "data", zk, "SCRAM-SHA-256,SCRAM-SHA-512",
                                       "group.initial.rebalance.delay.ms=0")
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
        values = [f"scram-{i}".encode() for i in range(50)]
        assert rdkafka_round_trip(conf, "scram-t", values) == values

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


def test_kafka_configs_bootstrap_server_alters_and_describes_users(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """KIP-554: Kafka 3.9.2's kafka-configs.sh --bootstrap-server goes through
    AlterUserScramCredentials / DescribeUserScramCredentials (the password is salted and hashed
    by the tool); the user authenticates, the describe output is Kafka's, a deletion stops it."""
    zk = zookeeper.connect_string("/kip554")
    broker, plain, sasl = scram_broker(tmp_path / "data", zk, "SCRAM-SHA-256,SCRAM-SHA-512")
    bootstrap = f"127.0.0.1:{sasl}"
    admin = ["--bootstrap-server", f"127.0.0.1:{plain}"]
    try:
        out = run_tool(CONFIG_COMMAND, *admin, "--alter", "--add-config",
                       "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-512]",
                       "--entity-type", "users", "--entity-name", "alice").stdout
        assert "Completed updating config for user alice." in out
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret") is None
        assert authenticates(bootstrap, "SCRAM-SHA-512", "alice", "alice-512") is None
        # (kafka-configs --describe of users also asks DescribeClientQuotas, not built here: the
        # request is sent as the tool's admin client sends it)
        assert describe(plain, "alice") == [(0, [(1, 8192), (2, 4096)])]
        assert describe(plain, "nobody", "alice", "alice")[0] == (ErrorCode.RESOURCE_NOT_FOUND, [])
        assert describe(plain, "alice", "alice")[0][0] == ErrorCode.DUPLICATE_RESOURCE
        # the znode is Kafka's: readable by Kafka's own --zookeeper describe
        out = run_tool(CONFIG_COMMAND, "--zookeeper", zk, "--describe", "--entity-type", "users",
                       "--entity-name", "alice").stdout
        assert "SCRAM-SHA-256=salt=" in out and "iterations=8192" in out, out
        # the tool refuses these itself; the broker's own checks, with ZkAdminManager's answers
        with RawConnection(plain) as c:
            resp = c.call(51, 0, AlterUserScramCredentialsRequest(
                upsertions=[ScramCredentialUpsertion(name="bob", mechanism=1, iterations=100, salt=b"s",
                                                     salted_password=b"p" * 32),
                            ScramCredentialUpsertion(name="carol", mechanism=9, iterations=4096, salt=b"s",
                                                     salted_password=b"p" * 32)],
                deletions=[ScramCredentialDeletion(name="dave", mechanism=2)]))
        assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
            ("dave", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            ("bob", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            ("carol", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
        assert describe(plain, "bob")[0][0] == ErrorCode.RESOURCE_NOT_FOUND
        run_tool(CONFIG_COMMAND, *admin, "--alter", "--delete-config", "SCRAM-SHA-256",
                 "--entity-type", "users", "--entity-name", "alice")
        deadline = time.monotonic() + 20
        while authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=3) is None:
            assert time.monotonic() < deadline, "the deleted credential still authenticates"
        assert describe(plain, "alice") == [(0, [(2, 4096)])]
        assert describe(plain) == [(0, [(2, 4096)])]  # all users with a credential
    finally:
        broker.stop()
