"""Raw transaction coordinator requests for tests (tests/integration/test_transactions.py,
tests/cluster/test_transactions.py): InitProducerId the way a client retries it, AddPartitionsToTxn
with its per-partition answers, a topic auto-created by Metadata; the last stable offset and a
confluent-kafka reader per isolation level, to check what transactions left behind."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from protocol.errors import ErrorCode
from protocol.messages import (
    AddPartitionsToTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.messages.metadata_request import MetadataRequestTopic
from tests.raw_client import RawConnection

RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def init(conn: RawConnection, tid: str, version: int = 4, producer: tuple[int, int] = (-1, -1),
         timeout_ms: int = 60000) -> tuple[int, int, int]:
    r = conn.call(22, version, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                                     producer_id=producer[0], producer_epoch=producer[1]))
    return r.error_code, r.producer_id, r.producer_epoch


def init_when_ready(conn: RawConnection, tid: str, timeout: float = 30.0) -> tuple[int, int, int]:
    """InitProducerId as a client does it: FindCoordinator, then retry the retriable answers
    (the coordinator loads its partitions after a start), bounded."""
    deadline = time.monotonic() + timeout
    while True:
        found = conn.call(10, 3, FindCoordinatorRequest(key=tid, key_type=1))
        answer = init(conn, tid) if found.error_code == 0 else (found.error_code, -1, -1)
        if answer[0] not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def auto_create(conn: RawConnection, topic: str) -> None:
    """The topic, auto-created by a Metadata request (num.partitions=2)."""
    r = conn.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
    assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [(topic, 0, 2)]


def add_partitions(conn: RawConnection, version: int, tid: str, pid: int, epoch: int,
                   topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    r = conn.call(24, version, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_offsets(conn: RawConnection, topic: str, partitions: Sequence[int], isolation_level: int) -> list[int]:
    """ListOffsets LATEST of each partition: the high watermark (isolation 0) or the last stable
    offset (1), -1 for a partition that answered an error."""
    r = conn.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=i, timestamp=-1)
                                                 for i in partitions])]))
    got = {p.partition_index: p.offset if p.error_code == 0 else -1 for t in r.topics for p in t.partitions}
    return [got.get(i, -1) for i in partitions]


def until_stable(port: int, topic: str, partitions: int | Sequence[int], timeout: float = 30.0) -> list[int]:
    """Wait until no transaction is open on the partitions (the first n, or those named; led by
    the broker on `port`): the last stable offset equals the high watermark, i.e. every marker is
    written. Returns the offsets; fails after `timeout` with both lists."""
    if isinstance(partitions, int):
        partitions = range(partitions)
    deadline = time.monotonic() + timeout
    with RawConnection(port, "until-stable") as conn:
        while True:
            hw = end_offsets(conn, topic, partitions, 0)
            lso = end_offsets(conn, topic, partitions, 1)
            if lso == hw and -1 not in hw:
                return hw
            assert time.monotonic() < deadline, f"{topic}: last stable offsets {lso} never reached {hw}"
            time.sleep(0.05)


def read_values(bootstrap: str, topic: str, partitions: int | Sequence[int], isolation: str,
                timeout: float = 30.0) -> list[bytes]:
    """The values of the partitions (the first n, or those named) from the beginning to their end
    for `isolation` (the last stable offset for read_committed: librdkafka's partition EOF),
    sorted."""
    return sorted(read_records(bootstrap, topic, partitions, isolation, timeout).values())


def read_records(bootstrap: str, topic: str, partitions: int | Sequence[int], isolation: str,
                 timeout: float = 30.0, **config: Any) -> dict[tuple[int, int], bytes]:
    """read_values' records by (partition, offset); `config` adds consumer settings."""
    if isinstance(partitions, int):
        partitions = range(partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation, **config})
    try:
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in partitions])
        pending = set(partitions)
        records: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"{topic} partitions {sorted(pending)} not read to their end"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                pending.discard(m.partition())
                continue
            records[(m.partition(), m.offset())] = m.value()
        return records
    finally:
        c.close()
