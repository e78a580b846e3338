"""broker.network_client against a real `odradek serve` (and, for what a real broker will not do
on demand, a plain asyncio server speaking our codecs): version negotiation, the APIs a replica
fetcher and the controller use, pipelining, request timeouts, disconnects, reconnect backoff
across a broker restart, the response size guard and write flow control."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from broker.network_client import (
    ClientConnection,
    ConnectError,
    ConnectionState,
    DisconnectError,
    InvalidResponseError,
    NetworkClient,
    NetworkClientConfig,
    RequestTimeoutError,
    UnknownNodeError,
)
from protocol.framing import encode_response_frame, parse_request
from protocol.messages import (
    RESPONSES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import metadata_request as mr
from protocol.messages import produce_request as pr
from protocol.messages.api_versions_response import ApiVersion
from protocol.records import Record, build_batch, decode_records
from tests.broker_process import BrokerProcess, free_port
from tests.raw_client import call_once

HOST = "127.0.0.1"
T = TypeVar("T")


async def bounded(aw: Awaitable[T], seconds: float = 10) -> T:
    """Await with a bound, so a broken client fails the test instead of hanging it."""
    return await asyncio.wait_for(aw, seconds)


def create_topic(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=10000, topics=[
        ct.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])])


def produce(topic: str, batch: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)])])


def fetch(topic: str, offset: int = 0, max_wait_ms: int = 0, max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, session_epoch=-1,
                        topics=[fr.FetchTopic(topic=topic, partitions=[
                            fr.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])


# -- a real broker -----------------------------------------------------------------------------


async def test_negotiated_versions_are_the_brokers_advertised_ranges(broker: BrokerProcess) -> None:
    advertised = await asyncio.to_thread(call_once, broker.port, 18, 0, ApiVersionsRequest())
    conn = await ClientConnection.open(HOST, broker.port)
    try:
        assert conn.api_versions_version == 3  # Kafka 3.9's ApiVersions, answered as asked
        assert conn.api_versions is not None
        assert conn.api_versions.ranges == {k.api_key: (k.min_version, k.max_version) for k in advertised.api_keys}
        for key, (_, high) in conn.api_versions.ranges.items():
            if RESPONSES.get(key) is not None:
                assert conn.usable_version(key) == min(high, RESPONSES[key].MAX_VERSION)
        assert conn.usable_version(3) == 12 and conn.usable_version(1) == 12  # Metadata, Fetch
    finally:
        conn.close()
        await conn.wait_closed()


async def test_metadata_create_topics_produce_and_fetch_through_the_client(broker: BrokerProcess) -> None:
    client = NetworkClient(NetworkClientConfig(client_id="nc-test"), nodes={1: (HOST, broker.port)})
    try:
        created = await client.send(1, create_topic("t"))
        assert created.topics[0].error_code == 0
        meta = await client.send(1, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")]))
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [("t", 0, 1)]
        assert [(b.host, b.port) for b in meta.brokers] == [(HOST, broker.port)]
        values = [b"v%d" % i for i in range(10)]
        produced = await client.send(1, produce("t", build_batch([Record(value=v, offset_delta=i)
                                                                  for i, v in enumerate(values)])))
        part = produced.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
        fetched = await client.send(1, fetch("t"))
        data = fetched.responses[0].partitions[0]
        assert (data.error_code, data.high_watermark) == (0, 10)
        _, records = decode_records(data.records)
        assert [r.value for r in records] == values
        # a fixed version, as the controller sends its inter-broker versions
        old = await client.send(1, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")]), version=1)
        assert [t.name for t in old.topics] == ["t"]
        assert client.is_ready(1) and client.node(1).connection is not None
        assert client.node(1).connection.in_flight.next_correlation_id() == 6  # one connection: 0..5 used
    finally:
        await client.close()


async def test_100_pipelined_requests_are_answered_in_order(broker: BrokerProcess) -> None:
    conn = await ClientConnection.open(HOST, broker.port)
    try:
        names = [f"missing-{i}" for i in range(100)]
        started = time.monotonic()
        futures = [conn.send_nowait(MetadataRequest(topics=[mr.MetadataRequestTopic(name=n)],
                                                    allow_auto_topic_creation=False)) for n in names]
        assert len(conn.in_flight) == 100  # all written before any answer was read
        finished: list[int] = []
        for i, f in enumerate(futures):
            f.add_done_callback(lambda _, i=i: finished.append(i))
        await conn.drain()
        answers = await asyncio.wait_for(asyncio.gather(*futures), 30)
        elapsed = time.monotonic() - started
        assert [a.topics[0].name for a in answers] == names
        assert {a.topics[0].error_code for a in answers} == {3}  # UNKNOWN_TOPIC_OR_PARTITION
        assert finished == list(range(100))
        assert len(conn.in_flight) == 0 and not conn.closed
        print(f"100 pipelined Metadata requests answered in {elapsed * 1000:.0f} ms")
    finally:
        conn.close()
        await conn.wait_closed()


async def test_a_disconnect_fails_the_requests_in_flight(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=["num.partitions=1"]).start()
    client = NetworkClient(nodes={1: (HOST, b.port)})
    try:
        assert (await client.send(1, create_topic("idle"))).topics[0].error_code == 0
        conn = await client.ready(1)
        # long polls on an empty partition: the broker parks them for 20 s
        polls = [conn.send_nowait(fetch("idle", max_wait_ms=20_000)) for _ in range(3)]
        started = time.monotonic()
        b.kill()
        results = await asyncio.wait_for(asyncio.gather(*polls, return_exceptions=True), 10)
        elapsed = time.monotonic() - started
        assert [type(r) for r in results] == [DisconnectError] * 3
        assert "closed by the broker" in str(results[0]) or "connection lost" in str(results[0])
        assert elapsed < 5  # failed when the connection went, not when the poll would have ended
        assert client.connection_state(1) is ConnectionState.DISCONNECTED
        with pytest.raises(ConnectError):
            await client.send(1, MetadataRequest(topics=[]))
    finally:
        await client.close()
        b.kill()


async def test_client_side_disconnect_fails_in_flight_and_reconnects_after_the_backoff(broker: BrokerProcess) -> None:
    client = NetworkClient(NetworkClientConfig(reconnect_backoff_ms=50, reconnect_backoff_max_ms=50),
                           nodes={1: (HOST, broker.port)})
    try:
        assert (await client.send(1, create_topic("idle"))).topics[0].error_code == 0
        conn = await client.ready(1)
        poll = conn.send_nowait(fetch("idle", max_wait_ms=20_000))
        client.disconnect(1)
        with pytest.raises(DisconnectError, match="disconnected by the client"):
            await bounded(poll)
        node = client.node(1)
        assert node.state is ConnectionState.DISCONNECTED and node.connection_delay(asyncio.get_running_loop().time()) <= 0.05
        meta = await client.send(1, MetadataRequest(topics=[]))  # waits out the 50 ms, reconnects
        assert meta.brokers[0].port == broker.port
        reconnect = node.attempts[-1]
        first = node.attempts[-2]
        assert first.ended is not None and reconnect.started - first.ended >= 0.05 * 0.999
        assert client.node(1).connection is not conn and client.is_ready(1)
    finally:
        await client.close()


async def test_reconnect_backs_off_exponentially_until_the_broker_is_back(tmp_path: Path) -> None:
    port = free_port()
    b = BrokerProcess(tmp_path / "data", port=port, overrides=["num.partitions=1"]).start()
    base_ms, max_ms = 20, 320
    client = NetworkClient(NetworkClientConfig(reconnect_backoff_ms=base_ms, reconnect_backoff_max_ms=max_ms),
                           nodes={1: (HOST, port)})
    restart: asyncio.Future[BrokerProcess] | None = None
    try:
        await client.send(1, MetadataRequest(topics=[]))
        conn = client.node(1).connection
        assert conn is not None
        b.kill()
        await asyncio.wait_for(conn.wait_closed(), 10)
        node = client.node(1)
        assert node.state is ConnectionState.DISCONNECTED
        deadline = time.monotonic() + 60
        failures = 0
        for _ in range(100):  # bounded: each attempt waits out its backoff first (<= 320 ms)
            assert time.monotonic() < deadline, "the broker did not come back"
            try:
                await client.send(1, MetadataRequest(topics=[]))
                break
            except ConnectError:
                failures += 1
                if failures == 6:  # enough attempts against a dead port: bring it back
                    restart = asyncio.ensure_future(asyncio.to_thread(b.start))
        else:
            pytest.fail("no reconnect within 100 attempts")
        assert node.state is ConnectionState.READY and node.failed_attempts == 0
        attempts = list(node.attempts)
        # attempts[0] was the first connection (lost when the broker was killed), then one per
        # failed attempt, then the one that succeeded
        assert len(attempts) == failures + 2 and attempts[-1].ended is None
        for k, a in enumerate(attempts[:-1]):
            assert a.ended is not None and a.backoff_ms is not None
            term = min(base_ms * 2**k, max_ms)
            assert int(0.8 * term) <= a.backoff_ms <= min(1.2 * term, max_ms), (k, a)
            gap = attempts[k + 1].started - a.ended
            # the next attempt waited the whole backoff, and not much longer (a loaded machine)
            assert a.backoff_ms / 1000 - 0.002 <= gap <= a.backoff_ms / 1000 + 0.5, (k, gap, a)
        # the jitter's lower bound is inclusive (256 ms was drawn once in CI)
        assert attempts[-2].backoff_ms is not None and attempts[-2].backoff_ms >= int(0.8 * max_ms)
        print("backoffs (ms):", [int(a.backoff_ms or 0) for a in attempts[:-1]])
    finally:
        if restart is not None:
            await restart
        await client.close()
        b.stop()


async def test_a_response_over_max_response_bytes_closes_the_connection(broker: BrokerProcess) -> None:
    client = NetworkClient(NetworkClientConfig(max_response_bytes=4096), nodes={1: (HOST, broker.port)})
    try:
        assert (await client.send(1, create_topic("big"))).topics[0].error_code == 0
        produced = await client.send(1, produce("big", build_batch([Record(value=b"x" * 10_000)])))
        assert produced.responses[0].partition_responses[0].error_code == 0
        conn = await client.ready(1)
        before = conn.send_nowait(MetadataRequest(topics=[]))
        too_big = conn.send_nowait(fetch("big"))
        behind = conn.send_nowait(MetadataRequest(topics=[]))
        assert [b.port for b in (await bounded(before)).brokers] == [broker.port]
        with pytest.raises(InvalidResponseError, match=r"response size 1[0-9]{4} out of bounds"):
            await bounded(too_big)
        # the request pipelined after it is answered on the wire, but the stream is abandoned
        with pytest.raises(DisconnectError) as e:
            await bounded(behind)
        assert type(e.value) is DisconnectError
        assert conn.closed and client.connection_state(1) is ConnectionState.DISCONNECTED
    finally:
        await client.close()


# -- a server that misbehaves on purpose --------------------------------------------------------


@dataclass
class FakeBroker:
    """A plain asyncio server speaking our codecs. ApiVersions is answered with `ranges` (or,
    above `unsupported_above`, with UNSUPPORTED_VERSION in the v0 layout, listing ApiVersions up
    to `list_api_versions_max` when set); other requests get no answer, or one with the wrong
    correlation id. With `stop_reading` it stops reading after ApiVersions until resume()."""

    ranges: dict[int, tuple[int, int]] = field(default_factory=lambda: {18: (0, 4), 3: (0, 12), 0: (3, 11)})
    answer_api_versions: bool = True
    unsupported_above: int | None = None
    list_api_versions_max: int | None = None
    wrong_correlation: bool = False
    stop_reading: bool = False
    seen: list[tuple[int, int]] = field(default_factory=list)
    request_seen: asyncio.Event = field(default_factory=asyncio.Event)
    eof: asyncio.Event = field(default_factory=asyncio.Event)
    transports: list[asyncio.Transport] = field(default_factory=list)
    server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    def resume(self) -> None:
        for t in self.transports:
            t.resume_reading()

    def answer(self, transport: asyncio.Transport, frame: bytes) -> None:
        header, _ = parse_request(frame)
        key, version, corr = header.request_api_key, header.request_api_version, header.correlation_id
        self.seen.append((key, version))
        self.request_seen.set()
        if key == 18 and self.answer_api_versions:
            if self.unsupported_above is not None and version > self.unsupported_above:
                keys = [] if self.list_api_versions_max is None else [
                    ApiVersion(api_key=18, min_version=0, max_version=self.list_api_versions_max)]
                chunks = encode_response_frame(corr, 18, 0, ApiVersionsResponse(error_code=35, api_keys=keys))
            else:
                chunks = encode_response_frame(corr, 18, version, ApiVersionsResponse(api_keys=[
                    ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in self.ranges.items()]))
            transport.writelines(chunks)
            if self.stop_reading:
                transport.pause_reading()
        elif key != 18 and self.wrong_correlation:
            transport.writelines(encode_response_frame(corr + 1, key, version, RESPONSES[key]()))


class _FakeConnection(asyncio.Protocol):
    def __init__(self, fake: FakeBroker) -> None:
        self.fake = fake
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.fake.transports.append(self.transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            assert self.transport is not None
            self.fake.answer(self.transport, frame)

    def eof_received(self) -> bool | None:
        self.fake.eof.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.fake.eof.set()


StartFake = Callable[..., Awaitable[FakeBroker]]


@pytest.fixture
async def fake_broker() -> AsyncIterator[Callable[..., Awaitable[FakeBroker]]]:
    started: list[FakeBroker] = []

    async def start(**kw: object) -> FakeBroker:
        fake = FakeBroker(**kw)  # type: ignore[arg-type]
        fake.server = await asyncio.get_running_loop().create_server(lambda: _FakeConnection(fake), HOST, 0)
        started.append(fake)
        return fake

    yield start
    for fake in started:
        assert fake.server is not None
        fake.server.close()
        for t in fake.transports:
            t.abort()
        await fake.server.wait_closed()


async def test_a_request_not_answered_within_request_timeout_closes_the_connection(fake_broker: StartFake) -> None:
    fake = await fake_broker()
    conn = await bounded(ClientConnection.open(HOST, fake.port, NetworkClientConfig(request_timeout_ms=300)))
    started = time.monotonic()
    first = conn.send_nowait(MetadataRequest(topics=[]))
    second = conn.send_nowait(MetadataRequest(topics=[]), timeout_ms=10_000)
    with pytest.raises(RequestTimeoutError, match="not answered within 300 ms"):
        await bounded(first)
    elapsed = time.monotonic() - started
    with pytest.raises(DisconnectError) as second_error:
        await bounded(second)
    assert type(second_error.value) is DisconnectError  # failed by the close, not timed out itself
    assert 0.3 <= elapsed < 2.3
    assert conn.closed
    await asyncio.wait_for(fake.eof.wait(), 5)  # the server saw the connection go
    assert fake.seen == [(18, 3), (3, 12), (3, 12)]


async def test_api_versions_not_answered_fails_the_connect(fake_broker: StartFake) -> None:
    fake = await fake_broker(answer_api_versions=False)
    with pytest.raises(ConnectError, match=r"ApiVersions with .* failed") as e:
        await bounded(ClientConnection.open(HOST, fake.port, NetworkClientConfig(request_timeout_ms=200)))
    assert isinstance(e.value.__cause__, RequestTimeoutError)
    await asyncio.wait_for(fake.eof.wait(), 5)


@pytest.mark.parametrize(("listed", "retried_at"), [(None, 0), (2, 2)])
async def test_api_versions_falls_back_when_the_broker_does_not_know_v3(
    fake_broker: StartFake, listed: int | None, retried_at: int
) -> None:
    fake = await fake_broker(unsupported_above=retried_at, list_api_versions_max=listed)
    conn = await bounded(ClientConnection.open(HOST, fake.port))
    try:
        assert fake.seen == [(18, 3), (18, retried_at)]
        assert conn.api_versions_version == retried_at
        assert conn.api_versions is not None and conn.api_versions.ranges == fake.ranges
        assert conn.usable_version(0) == 11
    finally:
        conn.close()
        await conn.wait_closed()


async def test_a_response_with_the_wrong_correlation_id_closes_the_connection(fake_broker: StartFake) -> None:
    fake = await fake_broker(wrong_correlation=True)
    conn = await bounded(ClientConnection.open(HOST, fake.port))
    with pytest.raises(InvalidResponseError, match="correlation id 2 but the oldest request in flight is Metadata"):
        await bounded(conn.send(MetadataRequest(topics=[])))
    assert conn.closed
    await asyncio.wait_for(fake.eof.wait(), 5)


async def test_send_waits_while_the_peer_does_not_read(fake_broker: StartFake) -> None:
    fake = await fake_broker(stop_reading=True)
    high = 256 * 1024
    conn = await bounded(ClientConnection.open(HOST, fake.port, NetworkClientConfig(write_buffer_high_bytes=high)))
    try:
        big = produce("t", build_batch([Record(value=b"x" * (1 << 20))]))
        written = 0
        for _ in range(64):  # the kernel's socket buffers take some megabytes first
            conn.send_nowait(big)
            written += 1
            if conn.write_paused:
                break
        assert conn.write_paused, "64 MB did not fill the socket buffers"
        assert conn.transport is not None
        buffered = conn.transport.get_write_buffer_size()
        assert buffered <= high + (1 << 20) + 4096  # at most one request over the mark
        drain = asyncio.ensure_future(conn.drain())
        done, _ = await asyncio.wait([drain], timeout=0.3)
        assert not done, "drain() returned while the peer was not reading"
        fake.resume()
        await asyncio.wait_for(drain, 30)
        assert not conn.write_paused
        print(f"paused after {written} MB written, {buffered} bytes in the transport")
    finally:
        conn.close()
        await conn.wait_closed()


async def test_moving_or_removing_a_node_abandons_its_connection(fake_broker: StartFake) -> None:
    silent = await fake_broker(answer_api_versions=False)
    good = await fake_broker()
    client = NetworkClient(nodes={1: (HOST, silent.port)})
    try:
        connecting = asyncio.ensure_future(client.ready(1))
        await bounded(silent.request_seen.wait())  # connected, waiting for ApiVersions
        assert client.connection_state(1) is ConnectionState.CONNECTING
        client.update_node(1, HOST, good.port)  # the broker re-registered elsewhere
        with pytest.raises(ConnectError, match="abandoned"):
            await bounded(connecting)  # not a CancelledError: the caller was not cancelled
        await bounded(silent.eof.wait())
        conn = await bounded(client.ready(1))
        assert client.node(1).port == good.port and conn.api_versions_version == 3
        pending = conn.send_nowait(MetadataRequest(topics=[]))  # never answered
        client.remove_node(1)
        with pytest.raises(DisconnectError, match="node removed"):
            await bounded(pending)
        with pytest.raises(UnknownNodeError):
            await client.send(1, MetadataRequest(topics=[]))
    finally:
        await client.close()
