"""A client's pipelined Produce requests append in the order they were sent, as Kafka's muted
connections guarantee: the first waits for a segment roll of one partition (an executor hop),
the second names another partition the first also writes to, and must not land there first."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

from protocol.framing import decode_response, encode_request_frame
from protocol.messages import ProduceRequest
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka.admin import KafkaAdminClient, NewTopic

PRODUCE_V = 9


def produce(correlation_id: int, parts: dict[int, bytes]) -> bytes:
    body = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[pr.TopicProduceData(
        name="order", partition_data=[pr.PartitionProduceData(index=p, records=build_batch([Record(value=v)]))
                                      for p, v in parts.items()])])
    return encode_request_frame(0, PRODUCE_V, correlation_id, "order-test", body)


def base_offsets(conn: RawConnection) -> dict[int, int]:
    (size,) = struct.unpack(">i", conn.recv_exact(4))
    _, resp = decode_response(conn.recv_exact(size), 0, PRODUCE_V)
    parts = resp.responses[0].partition_responses
    assert all(p.error_code == 0 for p in parts), parts
    return {p.index: p.base_offset for p in parts}


def test_pipelined_produces_keep_their_order_across_a_segment_roll(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:  # small segments: the second 1,000-byte batch of partition 0 rolls its segment
            admin.create_topics([NewTopic("order", 2, 1, topic_configs={"segment.bytes": "1500"})])
        finally:
            admin.close()
        conn = RawConnection(broker.port)
        try:
            conn.sock.sendall(produce(1, {0: b"x" * 1000}))
            assert base_offsets(conn) == {0: 0}
            for round_ in range(3):  # each round: a roll due on partition 0 in the first request
                conn.sock.sendall(produce(10 + round_, {0: b"y" * 1000, 1: b"first"})
                                  + produce(20 + round_, {1: b"second"}))
                first, second = base_offsets(conn), base_offsets(conn)
                assert first[1] == 2 * round_ and second[1] == 2 * round_ + 1, (round_, first, second)
        finally:
            conn.close()
    finally:
        broker.stop()
