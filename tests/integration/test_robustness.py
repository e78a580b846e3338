"""Bad input from raw sockets never takes the broker down, never changes the disk, and is
logged; acknowledged records survive SIGTERM and SIGKILL restarts."""

from __future__ import annotations

import hashlib
import random
import socket
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.framing import decode_response, encode_request_frame
from protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import fetch_request as fr
from protocol.messages import list_offsets_request as lr
from protocol.messages import metadata_request as mr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic


def api_versions_ok(broker: BrokerProcess) -> bool:
    """A fresh connection still gets a correct ApiVersions answer."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(encode_request_frame(18, 3, 77, "probe", ApiVersionsRequest(
            client_software_name="probe", client_software_version="1")))
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr, body = decode_response(recv_exact(s, size), 18, 3)
        return corr == 77 and body.error_code == 0 and any(k.api_key == 0 for k in body.api_keys)


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def send_and_drain(broker: BrokerProcess, data: bytes) -> bytes:
    """Send bytes, half-close, read until the broker answers everything and closes."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            return b""
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            out += chunk
        return out


def disk_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture
def strict_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=["auto.create.topics.enable=false"]).start()
    try:
        yield b
    finally:
        b.stop()


def valid_frames() -> list[bytes]:
    batch = build_batch([Record(0, 0, 0, b"k", b"v", [])], base_timestamp=1)
    return [
        encode_request_frame(18, 3, 1, "c", ApiVersionsRequest(client_software_name="a", client_software_version="1")),
        encode_request_frame(3, 12, 2, "c", MetadataRequest(topics=[mr.MetadataRequestTopic(name="nosuch")])),
        encode_request_frame(3, 1, 3, "c", MetadataRequest(topics=None)),
        encode_request_frame(0, 9, 4, "c", ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
            pr.TopicProduceData(name="nosuch", partition_data=[pr.PartitionProduceData(index=0, records=batch)])])),
        encode_request_frame(1, 12, 5, "c", FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            session_epoch=-1, topics=[fr.FetchTopic(topic="nosuch", partitions=[
                fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])),
        encode_request_frame(2, 7, 6, "c", ListOffsetsRequest(replica_id=-1, topics=[lr.ListOffsetsTopic(
            name="nosuch", partitions=[lr.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
    ]


def test_malformed_frames_close_only_that_connection(strict_broker: BrokerProcess) -> None:
    b = strict_broker
    before = disk_digest(b.log_dir)
    # size prefix far above socket.request.max.bytes, negative, and a truncated frame
    assert send_and_drain(b, struct.pack(">i", 2**31 - 1) + b"x" * 100) == b""
    assert send_and_drain(b, struct.pack(">i", -5)) == b""
    assert send_and_drain(b, struct.pack(">i", 100) + b"\x00\x12\x00") == b""
    # unknown api key, and an unsupported version of a known one
    assert send_and_drain(b, struct.pack(">ihhi", 12, 999, 0, 1) + b"\x00\x01x") == b""
    assert send_and_drain(b, struct.pack(">ihhi", 12, 3, 99, 1) + b"\x00\x01x") == b""
    # a header cut inside the client id
    assert send_and_drain(b, struct.pack(">ihhih", 12, 3, 1, 1, 50) + b"ab") == b""
    assert api_versions_ok(b)
    assert "closing connection" in b.log_text()
    assert disk_digest(b.log_dir) == before


def test_unsupported_api_versions_version_gets_v0_error(strict_broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", strict_broker.port), timeout=10) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 99, 42, 0))
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr, body = decode_response(recv_exact(s, size), 18, 0)
    assert corr == 42 and body.error_code == 35
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} >= {(18, 0, 4), (0, 0, 11)}


def test_fuzzed_frames_never_take_the_broker_down(strict_broker: BrokerProcess) -> None:
    b = strict_broker
    before = disk_digest(b.log_dir)
    rng = random.Random(20261122)
    frames = valid_frames()
    for i in range(300):
        frame = bytearray(rng.choice(frames))
        kind = i % 4
        if kind == 0:  # flip bytes after the size prefix
            for _ in range(rng.randint(1, 6)):
                frame[rng.randrange(4, len(frame))] = rng.randrange(256)
        elif kind == 1:  # cut the body short, keeping the size prefix honest
            cut = rng.randrange(6, len(frame))
            frame = bytearray(struct.pack(">i", cut - 4)) + frame[4:cut]
        elif kind == 2:  # random garbage body
            body = rng.randbytes(rng.randrange(0, 200))
            frame = bytearray(struct.pack(">i", len(body)) + body)
        else:  # valid header, garbage tail
            frame += rng.randbytes(rng.randrange(1, 50))
            frame[:4] = struct.pack(">i", len(frame) - 4)
        send_and_drain(b, bytes(frame))
    assert api_versions_ok(b)
    assert b.proc is not None and b.proc.poll() is None
    assert disk_digest(b.log_dir) == before


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_keeps_every_acknowledged_record_and_topic_configs(tmp_path: Path, how: str) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("durable", 2, 1, topic_configs={"retention.ms": "123456789"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, linger_ms=2)
        futures = [producer.send("durable", value=f"r{i}".encode(), partition=i % 2) for i in range(5000)]
        producer.flush()
        acked = [f.get(10) for f in futures]
        producer.close()
        assert len(acked) == 5000
    finally:
        if how == "sigkill":
            b.kill()
        else:
            assert b.stop() == 0
    b2 = BrokerProcess(tmp_path / "data", port=b.port).start()
    try:
        assert ("(clean shutdown)" if how == "sigterm" else "UNCLEAN") in b2.log_text()
        consumer = KafkaConsumer(bootstrap_servers=b2.bootstrap, consumer_timeout_ms=10000)
        tps = [TopicPartition("durable", p) for p in range(2)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        values = set()
        for msg in consumer:
            values.add(msg.value)
            if len(values) == 5000:
                break
        consumer.close()
        assert values == {f"r{i}".encode() for i in range(5000)}
        admin = KafkaAdminClient(bootstrap_servers=b2.bootstrap)
        from kafka.admin import ConfigResource, ConfigResourceType

        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "durable")])
        admin.close()
        assert described["topic"]["durable"]["retention.ms"]["value"] == "123456789"
    finally:
        b2.stop()
