"""Raw transaction coordinator requests for tests (tests/integration/test_transactions.py,
tests/cluster/test_transactions.py): InitProducerId the way a client retries it, AddPartitionsToTxn
with its per-partition answers, a topic auto-created by Metadata."""

from __future__ import annotations

import time

from protocol.errors import ErrorCode
from protocol.messages import (
    AddPartitionsToTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
)
from protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
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
