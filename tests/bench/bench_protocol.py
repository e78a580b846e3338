"""Decode/encode rates of the generated codecs on realistic messages.

Workloads (as the issue names them): a Produce v9 request as librdkafka sends it (one topic,
6 partitions, 16 KiB of records each), a Fetch v12 response carrying 1 MiB of records (8
partitions x 128 KiB), and a Metadata v12 response for a 3-broker cluster with 10 topics x 6
partitions. Records are opaque bytes here, as on the broker's hot path.

    python -m tests.bench.bench_protocol
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from protocol.messages import FetchResponse, MetadataResponse, ProduceRequest
from protocol.messages import fetch_response as fr
from protocol.messages import metadata_response as mr
from protocol.messages import produce_request as pr


def produce_v9() -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            pr.TopicProduceData(
                name="bench-topic",
                partition_data=[
                    pr.PartitionProduceData(index=i, records=bytes(16384)) for i in range(6)
                ],
            )
        ],
    )


def fetch_v12() -> FetchResponse:
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=12345,
        responses=[
            fr.FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    fr.PartitionData(
                        partition_index=i,
                        high_watermark=1_000_000,
                        last_stable_offset=1_000_000,
                        log_start_offset=0,
                        records=memoryview(bytes(131072)),
                    )
                    for i in range(8)
                ],
            )
        ],
    )


def metadata_v12() -> MetadataResponse:
    return MetadataResponse(
        brokers=[
            mr.MetadataResponseBroker(node_id=i, host=f"broker-{i}.local", port=9092, rack=None)
            for i in range(3)
        ],
        cluster_id="odradek-bench-cluster",
        controller_id=0,
        topics=[
            mr.MetadataResponseTopic(
                name=f"topic-{t}",
                topic_id=uuid.UUID(int=t + 1),
                partitions=[
                    mr.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=5,
                        replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                        isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                        offline_replicas=[],
                    )
                    for p in range(6)
                ],
            )
            for t in range(10)
        ],
    )


def rate(fn: Callable[[], object], seconds: float = 1.0) -> float:
    """Calls per second, measured over at least `seconds`."""
    n = 0
    batch = 1
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed
        batch = min(batch * 2, 10_000)


def run(seconds: float = 1.0) -> list[tuple[str, int, float, float]]:
    """[(workload, encoded bytes, decodes/s, encodes/s)]."""
    rows = []
    for name, msg, version in (
        ("Produce v9 request (6 x 16 KiB)", produce_v9(), 9),
        ("Fetch v12 response (1 MiB records)", fetch_v12(), 12),
        ("Metadata v12 response (10 topics x 6 partitions)", metadata_v12(), 12),
    ):
        cls = type(msg)
        data = msg.encode(version)
        assert cls.decode(data, version) == msg
        parts: list[bytes] = []
        dec = rate(lambda cls=cls, data=data, version=version: cls.decode(data, version), seconds)
        enc = rate(
            lambda msg=msg, version=version, parts=parts: (parts.clear(), msg.encode_into(version, parts.append)),
            seconds,
        )
        rows.append((name, len(data), dec, enc))
    return rows


def markdown(rows: list[tuple[str, int, float, float]]) -> str:
    lines = [
        "| message | bytes | decode msgs/s | encode msgs/s |",
        "|---|---:|---:|---:|",
    ]
    for name, size, dec, enc in rows:
        lines.append(f"| {name} | {size:,} | {dec:,.0f} | {enc:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run()))
