"""Memory and connection bounds (issue #12 §2), through a real broker and raw sockets.

* Clients that pipeline large fetches and never read cost the broker a bounded amount of memory
  (unsent responses mute the connection; record bytes are streamed from the files by sendfile).
* Streamed fetch responses are byte-exact and stay in request order with other responses.
* Partly received requests across connections are bounded by `queued.max.request.bytes`.
* A request trickling in (slowloris) is cut after `socket.request.receive.timeout.ms`.
* A burst of bad frames logs at most the rate limit, then one "suppressed" summary.
"""

from __future__ import annotations

import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from protocol.framing import decode_response, encode_request_frame
from protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import list_offsets_request as lr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch, decode_records, iter_batches
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection

TOPIC = "big"
BATCH_VALUE = 500_000
BATCHES = 8  # 4 MB of records in one segment


def rss_bytes(b: BrokerProcess) -> int:
    assert b.proc is not None
    for line in Path(f"/proc/{b.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def fill_topic(b: BrokerProcess) -> list[bytes]:
    """Create TOPIC and produce BATCHES batches (acks=1); returns the values in offset order."""
    values = [bytes([i]) * BATCH_VALUE for i in range(BATCHES)]
    with RawConnection(b.port) as c:
        resp = c.call(19, 5, CreateTopicsRequest(timeout_ms=10000, topics=[
            ct.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
        assert resp.topics[0].error_code == 0
        for v in values:
            batch = build_batch([Record(value=v)], base_timestamp=1)
            resp = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
                pr.TopicProduceData(name=TOPIC, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
            assert resp.responses[0].partition_responses[0].error_code == 0
    return values


def create_topic(b: BrokerProcess, name: str) -> None:
    with RawConnection(b.port) as c:
        resp = c.call(19, 5, CreateTopicsRequest(timeout_ms=10000, topics=[
            ct.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
        assert resp.topics[0].error_code == 0


def log_end_offset(b: BrokerProcess, topic: str) -> int:
    with RawConnection(b.port) as c:
        resp = c.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[lr.ListOffsetsTopic(
            name=topic, partitions=[lr.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        return int(resp.topics[0].partitions[0].offset)


def fetch_frame(corr: int, offset: int = 0, max_bytes: int = 8 << 20, topic: str = TOPIC,
                max_wait_ms: int = 0) -> bytes:
    return encode_request_frame(1, 12, corr, "t", FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, session_epoch=-1,
        topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])]))


def api_versions_frame(corr: int) -> bytes:
    return encode_request_frame(18, 3, corr, "t", ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))


def api_versions_ok(b: BrokerProcess) -> bool:
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(api_versions_frame(77))
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr, body = decode_response(recv_exact(s, size), 18, 3)
        return corr == 77 and body.error_code == 0


def small_rcvbuf_socket(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    overrides = getattr(request, "param", [])
    b = BrokerProcess(tmp_path / "data", overrides=overrides).start()
    try:
        yield b
    finally:
        b.stop()


def test_clients_that_never_read_pipelined_fetches_keep_broker_rss_bounded(broker: BrokerProcess) -> None:
    """3 connections x 64 pipelined 4 MB fetches, never read: 768 MB of responses were held in
    memory before (each response read whole); now the broker grows by a few MB at most."""
    fill_topic(broker)
    assert_stalled_readers_bounded(broker, lambda: small_rcvbuf_socket(broker.port))


def assert_stalled_readers_bounded(broker: BrokerProcess, connect: Callable[[], socket.socket]) -> None:
    """3 connections (made by `connect`) pipeline 64 fetches of the filled topic and never read:
    the broker's RSS grows by less than 100 MB, it serves others meanwhile, and a stalled
    connection is served once it reads."""
    base = rss_bytes(broker)
    socks = [connect() for _ in range(3)]
    try:
        for s in socks:
            s.sendall(b"".join(fetch_frame(i) for i in range(64)))
        # the broker is still serving others while these hold their responses
        assert api_versions_ok(broker)
        limit = base + 100 * 1024 * 1024
        peak = base
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and peak <= limit:  # bounded poll: growth shows within 4 s
            peak = max(peak, rss_bytes(broker))
            time.sleep(0.1)
        print(f"broker RSS before {base >> 20} MiB, peak with 3 stalled readers {peak >> 20} MiB")
        assert peak <= limit, f"RSS grew from {base >> 20} MiB to {peak >> 20} MiB"
        # the stalled connections are served once they read: the first response is whole and right
        s = socks[0]
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr, body = decode_response(recv_exact(s, size), 1, 12)
        assert corr == 0 and body.responses[0].partitions[0].error_code == 0
    finally:
        for s in socks:
            s.close()


def test_streamed_fetch_is_byte_exact_and_in_request_order(broker: BrokerProcess) -> None:
    """Large fetches (sent by sendfile) interleaved with small responses come back in request
    order, each record batch byte for byte as on disk."""
    fill_topic(broker)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        assert_streamed_fetches_in_order(broker, s)


def assert_streamed_fetches_in_order(broker: BrokerProcess, s: socket.socket) -> None:
    """Over `s`, 8 large fetches of the filled topic interleaved with 16 ApiVersions: every
    response in request order, the records byte for byte as in the segment."""
    seg = next((broker.log_dir / f"{TOPIC}-0").glob("*.log")).read_bytes()
    frames = []
    for i in range(12):
        frames.append(fetch_frame(2 * i, offset=i % BATCHES) if i % 3 else api_versions_frame(2 * i))
        frames.append(api_versions_frame(2 * i + 1))
    s.sendall(b"".join(frames))
    for corr in range(24):
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, size)
        assert struct.unpack_from(">i", data)[0] == corr
        i = corr // 2
        if corr % 2 or not i % 3:
            assert decode_response(data, 18, 3)[1].error_code == 0
            continue
        part = decode_response(data, 1, 12)[1].responses[0].partitions[0]
        assert part.error_code == 0
        records = bytes(part.records)
        start = seg.index(records[:61])
        assert records == seg[start:start + len(records)]
        assert len(records) >= BATCH_VALUE  # a streamed (large) response
        assert struct.unpack_from(">q", records)[0] == i % BATCHES


@pytest.mark.parametrize("broker", [[
    "socket.request.max.bytes=20000000", "queued.max.request.bytes=20000000",
]], indirect=True)
def test_partly_received_requests_are_bounded_across_connections(broker: BrokerProcess) -> None:
    """8 connections each declare a 20 MB frame and push its bytes as fast as the broker takes
    them: before, the broker buffered all 160 MB; now one reservation fits the pool and the
    other connections are not read until it is released."""
    base = rss_bytes(broker)
    declared = 20_000_000
    sent = [0] * 8
    socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=10) for _ in range(8)]
    stop = time.monotonic() + 6.0

    def push(i: int) -> None:
        s = socks[i]
        s.settimeout(1.5)  # a send blocked this long: the broker stopped reading us
        data = struct.pack(">i", declared) + b"\x00" * (declared - 1)  # one byte short: never completes
        view = memoryview(data)
        try:
            while sent[i] < len(data) and time.monotonic() < stop:
                sent[i] += s.send(view[sent[i]:sent[i] + (1 << 20)])
        except (TimeoutError, OSError):
            pass

    threads = [threading.Thread(target=push, args=(i,)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        growth = rss_bytes(broker) - base
        print(f"sent per connection (MB): {[round(n / 1e6, 1) for n in sent]}, broker RSS growth {growth >> 20} MiB")
        assert growth < 60 * 1024 * 1024, f"broker buffered {growth >> 20} MiB of partial requests"
        assert sum(1 for n in sent if n > 15_000_000) <= 1
        assert api_versions_ok(broker)  # a whole small request needs no reservation
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("broker", [["socket.request.receive.timeout.ms=1500"]], indirect=True)
def test_slowloris_connection_is_closed_after_the_receive_timeout(broker: BrokerProcess) -> None:
    frame = api_versions_frame(1)
    after = len(broker.lines)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        start = time.monotonic()
        closed_after = None
        for i in range(len(frame) - 1):  # never the last byte; bounded by the frame's length
            try:
                s.sendall(frame[i:i + 1])
            except OSError:
                closed_after = time.monotonic() - start
                break
            s.settimeout(0.25)  # 4 bytes/s, and the wait is for the close event
            try:
                if s.recv(1) == b"":
                    closed_after = time.monotonic() - start
                    break
            except TimeoutError:
                pass
        assert closed_after is not None, "the trickling connection was never closed"
        assert 1.4 <= closed_after < 5.0
    broker.wait_for_line("request not received within socket.request.receive.timeout.ms", timeout=5, after=after)
    assert api_versions_ok(broker)


def test_a_burst_of_bad_frames_is_logged_at_a_bounded_rate(broker: BrokerProcess) -> None:
    after = len(broker.lines)
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
            s.sendall(struct.pack(">i", -1))
            s.settimeout(10)
            assert s.recv(1) == b""  # closed by the broker
    line = broker.wait_for_line("suppressed warnings about client input", timeout=15, after=after)
    warnings = [x for x in broker.lines[after:] if "closing connection" in x]
    assert len(warnings) <= 10, f"{len(warnings)} warning lines for 300 bad frames"
    assert "suppressed=290" in line
    assert api_versions_ok(broker)


@pytest.mark.parametrize("broker", [["connections.max.idle.ms=1000"]], indirect=True)
def test_a_client_that_never_reads_its_responses_is_closed_when_idle(broker: BrokerProcess) -> None:
    """Responses waiting for a client that never reads are not activity: the connection is
    closed after connections.max.idle.ms, freeing what it holds."""
    fill_topic(broker)
    after = len(broker.lines)
    s = small_rcvbuf_socket(broker.port)
    try:
        s.sendall(b"".join(fetch_frame(i) for i in range(8)))
        broker.wait_for_line("closing idle connection", timeout=10, after=after)
    finally:
        s.close()
    assert api_versions_ok(broker)


@pytest.mark.parametrize("broker", [["queued.max.response.bytes=4096"]], indirect=True)
def test_unsent_responses_over_the_bound_stop_reading_the_connection(broker: BrokerProcess) -> None:
    """A long poll at the head holds back the responses behind it; once those exceed
    queued.max.response.bytes the broker stops reading the connection (Kafka mutes it), so a
    produce sent after them is not even read until the responses drain."""
    create_topic(broker, "idle")
    create_topic(broker, "x")
    batch = build_batch([Record(value=b"v")], base_timestamp=1)
    produce = encode_request_frame(0, 9, 99, "t", ProduceRequest(acks=0, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name="x", partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        # ~30 ApiVersions answers of ~400 bytes queue behind the 3 s long poll: > 4096 bytes
        s.sendall(fetch_frame(0, topic="idle", max_wait_ms=3000)
                  + b"".join(api_versions_frame(i) for i in range(1, 31)))
        # no event tells a client that the broker has answered requests it does not read; the
        # answers take microseconds, and the long poll holds them for 3 s
        time.sleep(0.5)
        s.sendall(produce)
        sent = time.monotonic()
        while time.monotonic() - sent < 1.0:  # bounded: the produce must stay unread meanwhile
            assert log_end_offset(broker, "x") == 0, "the connection was read past the bound"
            time.sleep(0.1)
        for corr in range(31):  # draining the responses lets the broker read on
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            assert struct.unpack_from(">i", recv_exact(s, size))[0] == corr
        deadline = time.monotonic() + 10
        while log_end_offset(broker, "x") != 1:
            assert time.monotonic() < deadline, "the produce was never read after the responses drained"
            time.sleep(0.05)


@pytest.mark.parametrize("broker", [["queued.max.request.bytes=1000000"]], indirect=True)
def test_a_request_waiting_for_pool_memory_is_served_once_memory_is_released(broker: BrokerProcess) -> None:
    """A holds the whole pool with a request it never finishes; B's 600 kB produce does not fit
    and B is not read; when A goes away B is read on and answered."""
    create_topic(broker, "x")
    batch = build_batch([Record(value=b"v" * 600_000)], base_timestamp=1)
    produce = encode_request_frame(0, 9, 7, "t", ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name="x", partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    a = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    b = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        a.sendall(struct.pack(">i", 1_000_000) + b"\x00" * 1000)
        assert api_versions_ok(broker)  # A's bytes were read: the pool is taken
        b.sendall(produce[:100_000])
        assert api_versions_ok(broker)  # B's first part was read too (or sits in the kernel)
        b.sendall(produce[100_000:])
        b.settimeout(1.0)  # bounded: no answer while A holds the pool
        with pytest.raises(TimeoutError):
            b.recv(1)
        assert log_end_offset(broker, "x") == 0
        a.close()
        b.settimeout(10)
        size = struct.unpack(">i", recv_exact(b, 4))[0]
        corr, resp = decode_response(recv_exact(b, size), 0, 9)
        assert corr == 7 and resp.responses[0].partition_responses[0].error_code == 0
        assert log_end_offset(broker, "x") == 1
    finally:
        a.close()
        b.close()


def test_shutdown_sends_streamed_fetch_responses_whole(broker: BrokerProcess) -> None:
    """SIGTERM while pipelined 4 MB fetch responses stream to a client that reads slowly (more
    than the kernel's socket buffers hold): every response the broker started or finished is
    sent whole (bounded by its drain time) before it closes the connection, which ends at a
    frame boundary. Before, what still waited in the connection's queue was dropped and the
    client got cut responses. The first response mutes the connection (more than
    queued.max.response.bytes unsent), so requests behind it are not dispatched before the
    SIGTERM, and are dropped with the connection as Kafka drops requests it has not processed
    (the client retries them): at least the first arrives, none is cut."""
    values = fill_topic(broker)
    s = small_rcvbuf_socket(broker.port)
    try:
        s.sendall(b"".join(fetch_frame(corr) for corr in range(8)))
        size = struct.unpack(">i", recv_exact(s, 4))[0]  # the first response is being sent
        assert size > BATCHES * BATCH_VALUE
        mark = len(broker.lines)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        broker.wait_for_line("shutting down", after=mark)
        received = 0
        while True:
            if received:
                head = s.recv(4, socket.MSG_WAITALL)
                if not head:
                    break  # closed at a frame boundary
                assert len(head) == 4, "closed inside a response's size"
                size = struct.unpack(">i", head)[0]
            got_corr, body = decode_response(recv_exact(s, size), 1, 12)  # whole, or ConnectionError
            part = body.responses[0].partitions[0]
            assert got_corr == received and part.error_code == 0
            records = bytes(part.records)
            got = [r.value for pos, _size in iter_batches(records) for r in decode_records(records, pos)[1]]
            assert got == values
            received += 1
        assert 1 <= received <= 8
        assert broker.proc.wait(30) == 0
    finally:
        s.close()
