"""KIP-368 re-authentication on a SASL_PLAINTEXT / PLAIN listener with
`connections.max.reauth.ms=2000`: SaslAuthenticate v1+ answers the session lifetime; an expired
session's next request closes the connection (Kafka's SocketServer); a SaslHandshake on the live
connection re-authenticates it (same principal, at most one start a second) and starts a new
session; and Kafka 3.9.2's console producer keeps producing across several re-authentications."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.sasl.authenticator import ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED
from protocol.framing import encode_request_frame
from protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from tests.broker_process import BrokerProcess, free_port
from tests.client_round_trips import rdkafka_read
from tests.compat.jvm import java_command
from tests.integration.test_sasl_clients import USERS, assert_closed, jaas
from tests.raw_client import RawConnection
from tests.subprocesses import reaped

LIFETIME_MS = 2000
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"


class ReauthBroker:
    def __init__(self, broker: BrokerProcess, plain: int, sasl: int) -> None:
        self.broker = broker
        self.plaintext = f"127.0.0.1:{plain}"
        self.sasl_port = sasl


@pytest.fixture(scope="module")
def reauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReauthBroker]:
    root = tmp_path_factory.mktemp("reauth")
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(
        root / "data", port=plain, listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        overrides=["num.partitions=1", "group.initial.rebalance.delay.ms=0", "sasl.enabled.mechanisms=PLAIN",
                   f"sasl.jaas.config={jaas('admin', USERS['admin'], USERS)}",
                   f"connections.max.reauth.ms={LIFETIME_MS}"]).start()
    try:
        yield ReauthBroker(broker, plain, sasl)
    finally:
        broker.stop()


def authenticate(conn: RawConnection, user: str = "alice", version: int = 2) -> tuple[int, int]:
    """SaslHandshake v1 + SaslAuthenticate: (error code, session lifetime)."""
    assert conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    auth = conn.call(36, version, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()))
    return auth.error_code, auth.session_lifetime_ms


def test_session_lifetime_answered_and_reauthentication_on_the_live_connection(reauth: ReauthBroker) -> None:
    after = len(reauth.broker.lines)
    with RawConnection(reauth.sasl_port) as conn:
        assert authenticate(conn, version=1) == (0, LIFETIME_MS)
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers
        assert authenticate(conn) == (0, LIFETIME_MS)  # a new session, on the same connection
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers
        # within a second of the last start, a handshake is no re-authentication: KafkaApis' answer
        assert conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == ILLEGAL_SASL_STATE
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers
    line = reauth.broker.wait_for_line("re-authenticated SASL client", after=after)
    assert "principal='User:alice'" in line


def test_a_request_after_the_session_expired_closes_the_connection(reauth: ReauthBroker) -> None:
    with RawConnection(reauth.sasl_port) as conn:
        start = time.monotonic()
        assert authenticate(conn) == (0, LIFETIME_MS)
        assert conn.call(3, 12, MetadataRequest(topics=[])).brokers
        time.sleep(max(0.0, start + LIFETIME_MS / 1000 + 0.2 - time.monotonic()))  # the expiry is the event
        conn.sock.sendall(encode_request_frame(3, 12, 99, "raw", MetadataRequest(topics=[])))
        assert_closed(conn)


def test_reauthentication_as_another_principal_fails_and_closes(reauth: ReauthBroker) -> None:
    with RawConnection(reauth.sasl_port) as conn:
        assert authenticate(conn) == (0, LIFETIME_MS)
        assert conn.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        auth = conn.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0admin\0{USERS['admin']}".encode()))
        assert (auth.error_code, auth.error_message) == (
            SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication from User.alice: User.admin")
        assert_closed(conn)


def test_java_console_producer_keeps_producing_across_reauthentications(reauth: ReauthBroker, tmp_path: Path) -> None:
    """The Java client re-authenticates at 85-95 % of the 2 s lifetime when it next sends: the
    producer sends a line every 0.2 s until the broker has logged three re-authentications of
    its connection (bounded: 30 s); no connection is closed as expired, every line is there."""
    topic = "reauth-java"
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f"sasl.jaas.config={jaas('alice', USERS['alice']).replace(chr(92), chr(92) * 2)}\n"
                      "linger.ms=0\n")
    after = len(reauth.broker.lines)
    bootstrap = f"127.0.0.1:{reauth.sasl_port}"
    proc = subprocess.Popen(java_command(CONSOLE_PRODUCER, ["--bootstrap-server", bootstrap, "--producer.config",
                                                            str(config), "--topic", topic]),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sent: list[str] = []

    def reauthentications() -> int:
        return sum(1 for line in reauth.broker.lines[after:]
                   if "re-authenticated SASL client" in line and "principal='User:alice'" in line)

    with reaped(proc):
        assert proc.stdin is not None
        deadline = time.monotonic() + 30
        while reauthentications() < 3 and time.monotonic() < deadline and proc.poll() is None:
            sent.append(f"line-{len(sent)}")
            proc.stdin.write(sent[-1] + "\n")
            proc.stdin.flush()
            reauth.broker.wait_until(lambda: reauthentications() >= 3, 0.2)  # paces the lines
        assert reauthentications() >= 3, (proc.poll(), reauth.broker.lines[after:][-20:])
        _, err = proc.communicate(timeout=60)  # closes stdin: the producer flushes and exits
        assert proc.returncode == 0, err[-4000:]
    assert not any("Disconnecting expired channel" in line for line in reauth.broker.lines[after:])
    read = rdkafka_read({"bootstrap.servers": reauth.plaintext}, topic, len(sent))
    assert read == [s.encode() for s in sent]
