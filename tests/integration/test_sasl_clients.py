"""SASL listeners against real clients: confluent-kafka (librdkafka), kafka-python, aiokafka,
kcat and Kafka 3.9's Java console producer and consumer authenticate with SASL/PLAIN on a
SASL_PLAINTEXT and a SASL_SSL listener and produce and consume; a wrong password gets each
client's authentication error with Kafka's message.

One broker serves the module: PLAINTEXT (admin), SASL_PLAINTEXT and SASL_SSL, PLAIN enabled
per listener with the users in the listener's JAAS entry (`user_<name>="<password>"`)."""

from __future__ import annotations

import struct
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from broker.sasl.authenticator import (
    FAILED_ANSWER_LINGER_S,
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from protocol.framing import encode_request_frame
from protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import (
    aiokafka_round_trip,
    kafka_python_round_trip,
    rdkafka_round_trip,
)
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.tls_certs import PASSWORD, CertificateAuthority

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": 'alice "quoted" secret'}


def jaas(username: str, password: str, users: dict[str, str] | None = None) -> str:
    def q(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    extra = "".join(f" user_{u}={q(p)}" for u, p in (users or {}).items())
    return f"{PLAIN_MODULE} required username={q(username)} password={q(password)}{extra};"


class SaslBroker:
    def __init__(self, broker: BrokerProcess, ca: CertificateAuthority, plain: int, sasl_plain: int, sasl_ssl: int) -> None:
        self.broker = broker
        self.ca = ca
        self.plaintext = f"127.0.0.1:{plain}"
        self.sasl_plaintext = f"127.0.0.1:{sasl_plain}"
        self.sasl_ssl = f"127.0.0.1:{sasl_ssl}"

    def rdkafka(self, protocol: str, user: str = "alice", password: str | None = None) -> dict[str, str]:
        conf = {"bootstrap.servers": self.sasl_ssl if protocol == "SASL_SSL" else self.sasl_plaintext,
                "security.protocol": protocol, "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": USERS[user] if password is None else password}
        if protocol == "SASL_SSL":
            conf["ssl.ca.location"] = str(self.ca.ca_file())
        return conf


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    root = tmp_path_factory.mktemp("sasl")
    ca = CertificateAuthority(root / "certs")
    server = ca.issue("broker", "broker0")
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    broker = BrokerProcess(
        root / "data", port=plain,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
                  f"SASL_SSL://127.0.0.1:{sasl_ssl}",
        overrides=[
            "num.partitions=1", "group.initial.rebalance.delay.ms=0",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas('admin', USERS['admin'], USERS)}",
            f"sasl.jaas.config={jaas('admin', USERS['admin'], USERS)}",
            "ssl.keystore.type=PKCS12", f"ssl.keystore.location={server.pkcs12_file()}",
            f"ssl.keystore.password={PASSWORD}",
        ]).start()
    try:
        yield SaslBroker(broker, ca, plain, sasl_plain, sasl_ssl)
    finally:
        broker.stop()


def create_topic(sasl: SaslBroker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": sasl.plaintext})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def values(n: int) -> list[bytes]:
    return [f"record-{i}-{'x' * 200}".encode() for i in range(n)]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_kafka_plain(sasl: SaslBroker, protocol: str) -> None:
    topic = f"sasl-rdkafka-{protocol.lower()}"
    create_topic(sasl, topic)
    expected = values(100)
    assert rdkafka_round_trip(sasl.rdkafka(protocol), topic, expected) == expected


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_kafka_wrong_password(sasl: SaslBroker, protocol: str) -> None:
    """librdkafka reports the broker's SaslAuthenticate error message as _AUTHENTICATION."""
    errors: list[KafkaError] = []
    admin = AdminClient(sasl.rdkafka(protocol, password="wrong") | {"error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert errors, "no authentication error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in errors[0].str()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafka_python_plain(sasl: SaslBroker, protocol: str) -> None:
    topic = f"sasl-kafka-python-{protocol.lower()}"
    create_topic(sasl, topic)
    expected = values(30)
    common = {"bootstrap_servers": sasl.sasl_ssl if protocol == "SASL_SSL" else sasl.sasl_plaintext,
              "security_protocol": protocol, "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"]}
    if protocol == "SASL_SSL":
        common["ssl_cafile"] = str(sasl.ca.ca_file())
    assert kafka_python_round_trip(common, topic, expected) == expected


def kafka_python_bootstrap_failures(sasl: SaslBroker, caplog: pytest.LogCaptureFixture,
                                    mechanism: str, password: str) -> list[str]:
    """Bootstrap kafka-python 3 against the PLAIN listener until it gives up (it retries a
    refused authentication until bootstrap_timeout_ms); the reason it logged for each attempt
    but the last, which the deadline may have cut short (unless it was the only one)."""
    with pytest.raises(KafkaPythonError, match="Unable to bootstrap"):
        KafkaProducer(bootstrap_servers=sasl.sasl_plaintext, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password,
                      bootstrap_timeout_ms=2000).close()
    failures = [r.getMessage() for r in caplog.records if "Bootstrap connection to" in r.getMessage()]
    assert failures, "kafka-python made no bootstrap attempt"
    # the last attempt may have been cut short by the bootstrap deadline (it gets what is left)
    return failures[:-1] or failures


def test_kafka_python_wrong_password(sasl: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    """Every attempt logs the broker's answer, SaslAuthenticationFailedError with Kafka's message.
    kafka-python's transport drops an answer that arrives with the close in one read ("socket
    disconnected"); the broker waits for the client's close after the answer, so none is lost."""
    failures = kafka_python_bootstrap_failures(sasl, caplog, "PLAIN", "nope")
    assert all("SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in m
               for m in failures), failures


def test_kafka_python_unsupported_mechanism(sasl: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    """A mechanism the listener does not enable: every attempt reads the handshake's
    UNSUPPORTED_SASL_MECHANISM answer, not just the close."""
    failures = kafka_python_bootstrap_failures(sasl, caplog, "SCRAM-SHA-512", USERS["alice"])
    assert all("UnsupportedSaslMechanismError" in m for m in failures), failures


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_aiokafka_plain(sasl: SaslBroker, protocol: str) -> None:
    from aiokafka.helpers import create_ssl_context

    topic = f"sasl-aiokafka-{protocol.lower()}"
    create_topic(sasl, topic)
    expected = values(30)
    common: dict[str, object] = {
        "bootstrap_servers": sasl.sasl_ssl if protocol == "SASL_SSL" else sasl.sasl_plaintext,
        "security_protocol": protocol, "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"]}
    if protocol == "SASL_SSL":
        common["ssl_context"] = create_ssl_context(cafile=str(sasl.ca.ca_file()))
    assert aiokafka_round_trip(common, topic, expected) == expected


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_plain(sasl: SaslBroker, protocol: str) -> None:
    topic = f"sasl-kcat-{protocol.lower()}"
    create_topic(sasl, topic)
    args = ["-b", sasl.sasl_ssl if protocol == "SASL_SSL" else sasl.sasl_plaintext,
            "-X", f"security.protocol={protocol}", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.username=admin", "-X", f"sasl.password={USERS['admin']}"]
    if protocol == "SASL_SSL":
        args += ["-X", f"ssl.ca.location={sasl.ca.ca_file()}"]
    lines = [f"kcat-{i}" for i in range(50)]
    subprocess.run(["kcat", *args, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True,
                   check=True, timeout=60, capture_output=True)
    out = subprocess.run(["kcat", *args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         text=True, check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines


def java_config(sasl: SaslBroker, path: Path, protocol: str, password: str) -> Path:
    # a properties file reads a backslash as an escape: the JAAS text's own escapes are doubled
    text = (f"security.protocol={protocol}\nsasl.mechanism=PLAIN\n"
            f"sasl.jaas.config={jaas('alice', password).replace(chr(92), chr(92) * 2)}\n")
    if protocol == "SASL_SSL":
        text += (f"ssl.truststore.type=PKCS12\nssl.truststore.location={sasl.ca.java_truststore()}\n"
                 f"ssl.truststore.password={PASSWORD}\n")
    path.write_text(text)
    return path


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_java_console_producer_and_consumer_plain(sasl: SaslBroker, tmp_path: Path, protocol: str) -> None:
    topic = f"sasl-java-{protocol.lower()}"
    create_topic(sasl, topic)
    bootstrap = sasl.sasl_ssl if protocol == "SASL_SSL" else sasl.sasl_plaintext
    config = java_config(sasl, tmp_path / "client.properties", protocol, USERS["alice"])
    lines = [f"java-{i}" for i in range(20)]
    run_tool(CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--producer.config", str(config),
             "--topic", topic, input="\n".join(lines) + "\n")
    out = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--consumer.config", str(config),
                   "--topic", topic, "--from-beginning", "--max-messages", str(len(lines)),
                   "--timeout-ms", "30000").stdout
    assert out.splitlines() == lines


def test_java_wrong_password_gets_kafkas_message(sasl: SaslBroker, tmp_path: Path) -> None:
    config = java_config(sasl, tmp_path / "bad.properties", "SASL_PLAINTEXT", "wrong")
    proc = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", sasl.sasl_plaintext, "--consumer.config", str(config),
                    "--topic", "anything", "--max-messages", "1", "--timeout-ms", "15000", check=False)
    assert ("org.apache.kafka.common.errors.SaslAuthenticationException: "
            "Authentication failed: Invalid username or password") in proc.stderr + proc.stdout


# -- the authenticator's state machine, request by request (RawConnection) ---------------------

def sasl_port(sasl: SaslBroker) -> int:
    return int(sasl.sasl_plaintext.rpartition(":")[2])


def assert_closed(conn: RawConnection) -> None:
    """The broker closed the connection: the next read sees EOF (bounded by the socket timeout)."""
    conn.sock.settimeout(10)
    assert conn.sock.recv(1) == b""


def test_handshake_v1_then_authenticate_then_requests_served(sasl: SaslBroker) -> None:
    with RawConnection(sasl_port(sasl)) as conn:
        versions = conn.call(18, 3, ApiVersionsRequest(client_software_name="raw", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert ranges[17] == (0, 1) and ranges[36] == (0, 2)  # Kafka 3.9's
        hs = conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert (hs.error_code, hs.mechanisms) == (0, ["PLAIN"])
        auth = conn.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0" + USERS["alice"].encode()))
        assert (auth.error_code, auth.auth_bytes, auth.session_lifetime_ms) == (0, b"", 0)
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers
        # after authentication, both SASL requests are out of place (KafkaApis' answers)
        assert conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == ILLEGAL_SASL_STATE
        again = conn.call(36, 2, SaslAuthenticateRequest(auth_bytes=b""))
        assert (again.error_code, again.error_message) == (
            ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")


def test_handshake_v0_then_raw_tokens(sasl: SaslBroker) -> None:
    """v0: the token goes without a Kafka header, size-prefixed, and so does the (empty) answer."""
    with RawConnection(sasl_port(sasl)) as conn:
        assert conn.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = b"\0admin\0" + USERS["admin"].encode()
        conn.sock.sendall(struct.pack(">i", len(token)) + token)
        assert conn.recv_exact(4) == b"\0\0\0\0"
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers


def test_request_before_authentication_closes_the_connection(sasl: SaslBroker) -> None:
    with RawConnection(sasl_port(sasl)) as conn:
        conn.call(18, 3, ApiVersionsRequest(client_software_name="raw", client_software_version="1"))
        conn.sock.sendall(encode_request_frame(3, 12, 99, "raw", MetadataRequest(topics=[])))
        assert_closed(conn)
    with RawConnection(sasl_port(sasl)) as conn:  # between the handshake and the token too
        conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        conn.sock.sendall(encode_request_frame(3, 12, 99, "raw", MetadataRequest(topics=[])))
        assert_closed(conn)


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes(sasl: SaslBroker) -> None:
    with RawConnection(sasl_port(sasl)) as conn:
        hs = conn.call(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert (hs.error_code, hs.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        assert_closed(conn)


def test_failed_authentication_answered_after_the_delay_then_closed(sasl: SaslBroker) -> None:
    """connection.failed.authentication.delay.ms (100 by default) passes before the answer."""
    with RawConnection(sasl_port(sasl)) as conn:
        conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        start = time.monotonic()
        auth = conn.call(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
        assert time.monotonic() - start >= 0.09
        assert (auth.error_code, auth.error_message) == (
            SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password")
        answered = time.monotonic()
        assert_closed(conn)  # the client kept its end open: the broker closes after its linger
        assert time.monotonic() - answered >= FAILED_ANSWER_LINGER_S / 2  # not right after the answer


def test_sasl_requests_on_a_plaintext_listener_are_illegal(sasl: SaslBroker) -> None:
    with RawConnection(int(sasl.plaintext.rpartition(":")[2])) as conn:
        assert conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == ILLEGAL_SASL_STATE
