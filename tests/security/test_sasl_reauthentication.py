"""KIP-368 re-authentication on a SASL_PLAINTEXT / PLAIN listener with
`connections.max.reauth.ms=2000`: SaslAuthenticate v1+ answers the session lifetime; an expired
session's next request closes the connection (Kafka's SocketServer); a SaslHandshake on the live
connection re-authenticates it (same principal, at most one start a second) and starts a new
session; Kafka 3.9.2's console producer keeps producing across several re-authentications; and
the brokers' own client (broker.network_client, the replica fetchers' and the controller's)
re-authenticates its connection before the session ends, after waiting out the requests in
flight, and closes it when the re-authentication fails."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.network_client import (
    REAUTH_WINDOW_FACTOR,
    REAUTH_WINDOW_JITTER,
    DisconnectError,
    NetworkClient,
    NetworkClientConfig,
)
from broker.sasl.authenticator import ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED
from broker.sasl.client import SaslClientCredentials
from protocol.framing import encode_request_frame
from protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
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
        return alice_reauthentications(reauth, after)

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


# -- the brokers' own client ------------------------------------------------------------------


def alice_client(reauth: ReauthBroker, password: str = USERS["alice"]) -> NetworkClient:
    return NetworkClient(NetworkClientConfig(sasl=SaslClientCredentials("PLAIN", "alice", password)),
                         {0: ("127.0.0.1", reauth.sasl_port)})


def alice_reauthentications(reauth: ReauthBroker, after: int) -> int:
    """The broker's lines from index `after` on that log a re-authentication of User:alice."""
    return sum(1 for line in reauth.broker.lines[after:]
               if "re-authenticated SASL client" in line and "principal='User:alice'" in line)


async def until(moment: float) -> None:
    """Wait for a point on the loop's clock (the session's re-authentication time or expiry)."""
    await asyncio.sleep(max(0.0, moment - asyncio.get_running_loop().time()))


async def test_network_client_reauthenticates_before_the_session_ends(reauth: ReauthBroker) -> None:
    """At 85-95 % of the lifetime the next send re-authenticates first; a connection left idle past
    its session's end does so too (the broker would close it at the request): the same connection
    serves throughout, and the broker logs each re-authentication, never an expired channel."""
    after = len(reauth.broker.lines)
    loop = asyncio.get_running_loop()
    client = alice_client(reauth)
    try:
        conn = await client.ready(0)
        authenticated = loop.time()
        assert conn.reauth_at is not None
        window = (LIFETIME_MS * REAUTH_WINDOW_FACTOR / 1000,
                  LIFETIME_MS * (REAUTH_WINDOW_FACTOR + REAUTH_WINDOW_JITTER) / 1000)
        assert window[0] - 0.1 <= conn.reauth_at - authenticated <= window[1]
        await until(conn.reauth_at)
        assert (await client.send(0, MetadataRequest(topics=[]))).brokers
        assert conn.reauthentications == 1
        renewed = loop.time()
        await until(renewed + LIFETIME_MS / 1000 + 0.2)  # idle past the renewed session's end
        assert (await client.send(0, MetadataRequest(topics=[]))).brokers
        assert conn.reauthentications == 2
        assert await client.ready(0) is conn and not conn.closed
    finally:
        await client.close()
    # the broker logs before it answers, but its lines reach us through a pipe and a reader thread
    await asyncio.to_thread(reauth.broker.wait_until, lambda: alice_reauthentications(reauth, after) >= 2, 10)
    assert alice_reauthentications(reauth, after) == 2
    assert not any("Disconnecting expired channel" in line for line in reauth.broker.lines[after:])


async def test_network_client_reauthentication_waits_for_the_request_in_flight(reauth: ReauthBroker) -> None:
    """Kafka's broker takes only SASL requests during a re-authentication: a send that finds it
    due while a long-poll Fetch is in flight waits for that answer, then re-authenticates, then
    goes; the Fetch is answered whole."""
    client = alice_client(reauth)
    topic = "reauth-in-flight"
    try:
        created = await client.send(0, CreateTopicsRequest(timeout_ms=10000, topics=[ct.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
        assert created.topics[0].error_code == 0
        conn = await client.ready(0)
        poll = asyncio.ensure_future(client.send(0, FetchRequest(
            replica_id=-1, max_wait_ms=1000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
            topics=[fr.FetchTopic(topic=topic, partitions=[fr.FetchPartition(partition=0, fetch_offset=0,
                                                                             partition_max_bytes=1 << 20)])])))
        while not conn.in_flight:
            await asyncio.sleep(0)  # until the Fetch is written
        conn.reauth_at = asyncio.get_running_loop().time()  # due now, with the Fetch in flight
        metadata = await asyncio.wait_for(client.send(0, MetadataRequest(topics=[])), 10)
        assert poll.done()  # answered before the re-authentication began
        fetched = poll.result()
        assert fetched.error_code == 0 and fetched.responses[0].partitions[0].error_code == 0
        assert metadata.brokers and conn.reauthentications == 1 and not conn.closed
    finally:
        await client.close()


async def test_network_client_closes_the_connection_when_reauthentication_fails(reauth: ReauthBroker) -> None:
    """The password changed under the connection: the re-authentication is refused, the send
    fails with DisconnectError (retriable: the node is reconnected after the backoff) and the
    connection is closed."""
    client = alice_client(reauth)
    try:
        conn = await client.ready(0)
        conn.config = dataclasses.replace(conn.config, sasl=SaslClientCredentials("PLAIN", "alice", "wrong"))
        conn.reauth_at = asyncio.get_running_loop().time()
        with pytest.raises(DisconnectError, match="re-authentication failed: SASL authentication failed"):
            await asyncio.wait_for(client.send(0, MetadataRequest(topics=[])), 10)
        assert conn.closed and not client.is_ready(0)
        assert (await client.send(0, MetadataRequest(topics=[]))).brokers  # a new connection, authenticated
        assert await client.ready(0) is not conn
    finally:
        await client.close()
