"""`odradek ... --command-config FILE` over SASL_PLAINTEXT and SASL_SSL with a SCRAM user: the Java
client properties a Kafka user has (`sasl.mechanism=SCRAM-SHA-256`, ScramLoginModule in
`sasl.jaas.config`, and for SASL_SSL keytool's PKCS12 truststore) make `topics`, `produce`,
`consume` with a group, `groups describe` (kafka-python) and `perf produce` (librdkafka)
authenticate against a real ZooKeeper-mode broker whose credentials Kafka 3.9.2's kafka-configs
wrote; a wrong password is reported as a refused authentication, not as a broker that is down. One broker serves the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.integration.test_cli import odradek, rows
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER_JAAS = f'{SCRAM} required username="admin" password="admin-secret";'
PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class SaslBroker:
    ca: CertificateAuthority
    ports: dict[str, str]
    root: Path

    def command_config(self, protocol: str, password: str = "alice-secret") -> Path:
        lines = [f"security.protocol={protocol}", "sasl.mechanism=SCRAM-SHA-256",
                 f'sasl.jaas.config={SCRAM} required \\\n    username="alice" \\\n    password="{password}";']
        if protocol == "SASL_SSL":
            lines += ["ssl.truststore.type=PKCS12", f"ssl.truststore.location={self.ca.java_truststore()}",
                      f"ssl.truststore.password={PASSWORD}"]
        path = self.root / f"{protocol}-{password}.properties"
        path.write_text("\n".join(lines) + "\n")
        return path


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    root = tmp_path_factory.mktemp("cli-sasl")
    zookeeper = ZooKeeperServer(root / "zookeeper").start()
    ca = CertificateAuthority(root / "certs")
    server = ca.issue("broker", "broker0")
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    zk = zookeeper.connect_string("/cli-sasl")
    broker: BrokerProcess | None = None
    try:
        broker = BrokerProcess(
            root / "data", port=plain, zookeeper_connect=zk, broker_id=1,
            listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
                      f"SASL_SSL://127.0.0.1:{sasl_ssl}",
            overrides=["offsets.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0",
                       "num.partitions=1", "sasl.enabled.mechanisms=SCRAM-SHA-256",
                       f"sasl.jaas.config={BROKER_JAAS}", "ssl.keystore.type=PKCS12",
                       f"ssl.keystore.location={server.pkcs12_file()}", f"ssl.keystore.password={PASSWORD}"]).start()
        run_tool(CONFIG_COMMAND, "--zookeeper", zk, "--alter", "--add-config", "SCRAM-SHA-256=[password=alice-secret]",
                 "--entity-type", "users", "--entity-name", "alice")
        b = SaslBroker(ca, {"SASL_PLAINTEXT": f"127.0.0.1:{sasl_plain}", "SASL_SSL": f"127.0.0.1:{sasl_ssl}"}, root)
        # the broker learns the credential through a /config/changes notification
        cfg = str(b.command_config("SASL_PLAINTEXT"))
        deadline = time.monotonic() + 30
        while odradek("topics", "list", "--timeout", "3", "--command-config", cfg,
                      bootstrap=b.ports["SASL_PLAINTEXT"]).returncode != 0:
            assert time.monotonic() < deadline, "alice's SCRAM credential never authenticated"
            time.sleep(0.2)
        yield b
    finally:
        if broker is not None:
            broker.stop()
        zookeeper.stop()


def ok(*args: str, bootstrap: str, input: bytes | None = None) -> str:
    r = odradek(*args, bootstrap=bootstrap, input=input)
    assert r.returncode == 0, (args, r.stdout.decode(), r.stderr.decode())
    return r.stdout.decode()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_commands_authenticate_with_scram(sasl: SaslBroker, protocol: str) -> None:
    b, c = sasl.ports[protocol], ("--command-config", str(sasl.command_config(protocol)))
    topic, group = f"cli-{protocol}".lower(), f"readers-{protocol}".lower()
    ok("topics", "create", topic, "-p", "2", *c, bootstrap=b)
    assert topic in ok("topics", "list", *c, bootstrap=b).split()
    lines = [f"v{i}" for i in range(10)]
    r = odradek("produce", topic, *c, bootstrap=b, input=("\n".join(lines) + "\n").encode())
    assert r.returncode == 0 and "Produced 10 records" in r.stderr.decode(), r.stderr.decode()
    out = ok("consume", topic, "--from-beginning", "-n", "10", "--group", group, *c, bootstrap=b)
    assert sorted(out.splitlines()) == sorted(lines)
    described = rows(ok("groups", "describe", group, *c, bootstrap=b), "GROUP")
    assert sum(int(row[3]) for row in described) == 10 and {row[5] for row in described} == {"0"}, described
    perf = ok("perf", "produce", topic, "-n", "100", "-s", "20", *c, bootstrap=b)
    assert perf.startswith("100 records sent"), perf


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_wrong_password_is_named_as_a_refused_authentication(sasl: SaslBroker, protocol: str) -> None:
    """Not `cannot reach a broker`: kafka-python retries a refused authentication until its
    timeout and then reports a timeout; the CLI tells the two apart (clients/common.py)."""
    r = odradek("topics", "list", "--timeout", "5", "--command-config", str(sasl.command_config(protocol, "wrong")),
                bootstrap=sasl.ports[protocol])
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert "refused the connection" in err and "authentication failed" in err.lower(), err
    assert "cannot reach a broker" not in err, err
