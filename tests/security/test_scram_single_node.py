"""SCRAM on a single node (no ZooKeeper): Kafka 3.9.2's `kafka-configs.sh --bootstrap-server`
creates, describes and deletes a user's credential through AlterUserScramCredentials /
DescribeUserScramCredentials (KIP-554); the node keeps it in its metadata file in Kafka's salted
form, confluent-kafka and kafka-python authenticate with it over SASL_PLAINTEXT (at once: no
notification to wait for), it survives a restart, and once deleted confluent-kafka is refused
with Kafka's authentication error (kafka-python 3.0.12 reports only "Unable to bootstrap"). The broker's own validation answers Kafka's error codes."""

from __future__ import annotations

import json
from pathlib import Path

from broker.sasl.scram import ScramCredential, credential
from controller.metadata import METADATA_FILE
from protocol.errors import ErrorCode
from protocol.messages import AlterUserScramCredentialsRequest
from protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import kafka_python_round_trip
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.security.test_scram_zookeeper import CONFIG_COMMAND, SCRAM_JAAS, authenticates, describe

REFUSED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


def kafka_python_conf(bootstrap: str, password: str) -> dict[str, object]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice", "sasl_plain_password": password}


def test_kafka_configs_manages_scram_users_of_a_single_node(tmp_path: Path) -> None:
    plain, sasl = free_port(), free_port()
    data = tmp_path / "data"
    broker = BrokerProcess(
        data, port=plain, listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        overrides=["sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512", f"sasl.jaas.config={SCRAM_JAAS}"])
    admin = ["--bootstrap-server", f"127.0.0.1:{plain}", "--entity-type", "users", "--entity-name", "alice"]
    bootstrap = f"127.0.0.1:{sasl}"
    broker.start()
    try:
        out = run_tool(CONFIG_COMMAND, *admin, "--alter", "--add-config",
                       "SCRAM-SHA-256=[iterations=8192,password=alice-secret]").stdout
        assert "Completed updating config for user alice." in out
        out = run_tool(CONFIG_COMMAND, *admin, "--describe").stdout
        assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in out, out
        # the credential is usable as soon as the alter is answered: one attempt, no retries
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=1) is None
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "wrong", timeout=1) is not None
        values = [f"single-{i}".encode() for i in range(20)]
        assert kafka_python_round_trip(kafka_python_conf(bootstrap, "alice-secret"), "scram-single", values) == values

        # stored as Kafka stores it: the salt and keys the password and iterations give
        stored = json.loads((data / METADATA_FILE).read_text())["scram_credentials"]
        assert list(stored) == ["alice"] and list(stored["alice"]) == ["SCRAM-SHA-256"]
        cred = ScramCredential.from_zk(stored["alice"]["SCRAM-SHA-256"])
        assert cred == credential("SCRAM-SHA-256", "alice-secret", 8192, cred.salt)

        broker.stop()
        broker.start()
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=1) is None
        assert describe(plain, "alice") == [(0, [(1, 8192)])]

        run_tool(CONFIG_COMMAND, *admin, "--alter", "--delete-config", "SCRAM-SHA-256")
        refused = authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=1)
        assert refused is not None and REFUSED in refused.str()
        assert describe(plain, "alice") == [(ErrorCode.RESOURCE_NOT_FOUND, [])]
        assert describe(plain) == []
        broker.stop()
        broker.start()
        assert authenticates(bootstrap, "SCRAM-SHA-256", "alice", "alice-secret", timeout=1) is not None
    finally:
        broker.stop()


def test_alter_user_scram_credentials_validates_as_kafka(tmp_path: Path) -> None:
    """ZkAdminManager's checks, each user with an error left unchanged; the ZooKeeper-mode test
    covers the same checks through the same handler, this one the single node's store."""
    broker = BrokerProcess(tmp_path / "data").start()

    def upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> ScramCredentialUpsertion:
        return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=b"salt",
                                        salted_password=b"p" * 32)

    try:
        with RawConnection(broker.port) as c:
            resp = c.call(51, 0, AlterUserScramCredentialsRequest(
                upsertions=[upsert("bob", iterations=4095), upsert("bob2", iterations=16385),
                            upsert("carol", mechanism=9), upsert("erin"), upsert("erin"), upsert("frank")],
                deletions=[ScramCredentialDeletion(name="dave", mechanism=2)]))
        assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
            ("dave", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            ("bob", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            ("bob2", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            ("carol", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            ("erin", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            ("frank", 0, None)]
        assert describe(broker.port) == [(0, [(1, 4096)])]  # frank only
        assert describe(broker.port, "erin")[0][0] == ErrorCode.RESOURCE_NOT_FOUND
    finally:
        broker.stop()
