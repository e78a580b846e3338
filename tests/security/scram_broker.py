"""One ZooKeeper-mode Odradek broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners and
SCRAM users written by Kafka 3.9.2's own `kafka-configs --zookeeper` before the tests use them,
as an operator sets SCRAM up: the module fixtures of the SCRAM client tests and the CLI's
--command-config tests share it (each checks for itself that the broker learnt the users)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
# the broker's own entry (its inter-broker credentials; a single broker does not use them)
BROKER_JAAS = f'{SCRAM_LOGIN} required username="admin" password="admin-secret";'


@dataclass
class ScramNode:
    ca: CertificateAuthority
    root: Path
    plaintext: str  # host:port of the PLAINTEXT listener (admin work without credentials)
    ports: dict[str, str]  # "SASL_PLAINTEXT" / "SASL_SSL" -> host:port


@contextlib.contextmanager
def scram_broker(root: Path, chroot: str, mechanisms: tuple[str, ...],
                 users: Mapping[str, Mapping[str, str]], *overrides: str) -> Iterator[ScramNode]:
    """Start ZooKeeper and the broker under `root`, enabling `mechanisms`; `users` maps each user
    to its password per mechanism, added through kafka-configs --zookeeper."""
    zookeeper = ZooKeeperServer(root / "zookeeper").start()
    ca = CertificateAuthority(root / "certs")
    server = ca.issue("broker", "broker0")
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    zk = zookeeper.connect_string(chroot)
    broker: BrokerProcess | None = None
    try:
        broker = BrokerProcess(
            root / "data", port=plain, zookeeper_connect=zk, broker_id=1,
            listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
                      f"SASL_SSL://127.0.0.1:{sasl_ssl}",
            overrides=["offsets.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0",
                       f"sasl.enabled.mechanisms={','.join(mechanisms)}", f"sasl.jaas.config={BROKER_JAAS}",
                       "ssl.keystore.type=PKCS12", f"ssl.keystore.location={server.pkcs12_file()}",
                       f"ssl.keystore.password={PASSWORD}", *overrides]).start()
        for user, passwords in users.items():
            run_tool(CONFIG_COMMAND, "--zookeeper", zk, "--alter", "--add-config",
                     ",".join(f"{m}=[password={p}]" for m, p in passwords.items()),
                     "--entity-type", "users", "--entity-name", user)
        yield ScramNode(ca, root, f"127.0.0.1:{plain}",
                        {"SASL_PLAINTEXT": f"127.0.0.1:{sasl_plain}", "SASL_SSL": f"127.0.0.1:{sasl_ssl}"})
    finally:
        if broker is not None:
            broker.stop()
        zookeeper.stop()
