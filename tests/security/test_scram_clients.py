"""SCRAM-SHA-256 and SCRAM-SHA-512 against real clients over SASL_PLAINTEXT and SASL_SSL:
kafka-python, aiokafka, kcat and Kafka 3.9.2's console producer and consumer authenticate with
credentials Kafka's kafka-configs.sh wrote to ZooKeeper, and produce and consume
(confluent-kafka: test_scram_zookeeper.py). One ZooKeeper-mode broker serves the module."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.client_round_trips import aiokafka_round_trip, kafka_python_round_trip
from tests.compat.jvm import run_tool
from tests.security.scram_broker import ScramNode, scram_broker
from tests.security.test_scram_zookeeper import authenticates
from tests.tls_certs import PASSWORD

CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PASSWORDS = {"SCRAM-SHA-256": "carol-256", "SCRAM-SHA-512": "carol-512"}
CASES = [(p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in PASSWORDS]
IDS = [f"{p}-{m}" for p, m in CASES]


class ScramBroker:
    def __init__(self, node: ScramNode) -> None:
        self.ca = node.ca
        self.admin = node.plaintext
        self.ports = node.ports
        self._admin_client = AdminClient({"bootstrap.servers": self.admin})

    def topic(self, protocol: str, mechanism: str, client: str) -> str:
        name = f"{client}-{protocol}-{mechanism}".lower()
        self._admin_client.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        return name


@pytest.fixture(scope="module")
def scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBroker]:
    with scram_broker(tmp_path_factory.mktemp("scram"), "/scram-clients", tuple(PASSWORDS),
                      {"carol": PASSWORDS}) as node:
        b = ScramBroker(node)
        for m, p in PASSWORDS.items():  # the broker learnt the credentials (a notification)
            assert authenticates(b.ports["SASL_PLAINTEXT"], m, "carol", p) is None
        yield b


def lines(n: int) -> list[str]:
    return [f"scram-{i}" for i in range(n)]


@pytest.mark.parametrize("protocol, mechanism", CASES, ids=IDS)
def test_kafka_python(scram: ScramBroker, protocol: str, mechanism: str) -> None:
    topic = scram.topic(protocol, mechanism, "kp")
    common = {"bootstrap_servers": scram.ports[protocol], "security_protocol": protocol,
              "sasl_mechanism": mechanism, "sasl_plain_username": "carol",
              "sasl_plain_password": PASSWORDS[mechanism]}
    if protocol == "SASL_SSL":
        common["ssl_cafile"] = str(scram.ca.ca_file())
    values = [v.encode() for v in lines(20)]
    assert kafka_python_round_trip(common, topic, values) == values


@pytest.mark.parametrize("protocol, mechanism", CASES, ids=IDS)
def test_aiokafka(scram: ScramBroker, protocol: str, mechanism: str) -> None:
    from aiokafka.helpers import create_ssl_context

    topic = scram.topic(protocol, mechanism, "aio")
    values = [v.encode() for v in lines(20)]
    common: dict[str, object] = {
        "bootstrap_servers": scram.ports[protocol], "security_protocol": protocol, "sasl_mechanism": mechanism,
        "sasl_plain_username": "carol", "sasl_plain_password": PASSWORDS[mechanism]}
    if protocol == "SASL_SSL":
        common["ssl_context"] = create_ssl_context(cafile=str(scram.ca.ca_file()))
    assert aiokafka_round_trip(common, topic, values) == values


@pytest.mark.parametrize("protocol, mechanism", CASES, ids=IDS)
def test_kcat(scram: ScramBroker, protocol: str, mechanism: str) -> None:
    topic = scram.topic(protocol, mechanism, "kcat")
    args = ["-b", scram.ports[protocol], "-X", f"security.protocol={protocol}", "-X", f"sasl.mechanism={mechanism}",
            "-X", "sasl.username=carol", "-X", f"sasl.password={PASSWORDS[mechanism]}"]
    if protocol == "SASL_SSL":
        args += ["-X", f"ssl.ca.location={scram.ca.ca_file()}"]
    expected = lines(30)
    proc = subprocess.run(["kcat", *args, "-P", "-t", topic], input="\n".join(expected) + "\n", text=True,
                          timeout=60, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run(["kcat", *args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         text=True, check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == expected


@pytest.mark.parametrize("protocol, mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "SCRAM-SHA-256")],
                         ids=["SASL_SSL-SCRAM-SHA-512", "SASL_PLAINTEXT-SCRAM-SHA-256"])
def test_java_console_producer_and_consumer(scram: ScramBroker, tmp_path: Path, protocol: str, mechanism: str) -> None:
    topic = scram.topic(protocol, mechanism, "java")
    config = tmp_path / "client.properties"
    text = (f"security.protocol={protocol}\nsasl.mechanism={mechanism}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="carol" password="{PASSWORDS[mechanism]}";\n')
    if protocol == "SASL_SSL":
        text += (f"ssl.truststore.type=PKCS12\nssl.truststore.location={scram.ca.java_truststore()}\n"
                 f"ssl.truststore.password={PASSWORD}\n")
    config.write_text(text)
    expected = lines(20)
    run_tool(CONSOLE_PRODUCER, "--bootstrap-server", scram.ports[protocol], "--producer.config", str(config),
             "--topic", topic, input="\n".join(expected) + "\n")
    out = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", scram.ports[protocol], "--consumer.config", str(config),
                   "--topic", topic, "--from-beginning", "--max-messages", str(len(expected)),
                   "--timeout-ms", "30000").stdout
    assert out.splitlines() == expected
