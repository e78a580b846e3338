"""Idempotent producer: a resent batch is written once (also after a restart); sequence gaps and
stale epochs are refused with Kafka's errors."""

from __future__ import annotations

import time
from pathlib import Path

from protocol.messages import (
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import list_offsets_request as lr
from protocol.messages import metadata_request as mr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection


def produce(conn: RawConnection, topic: str, pid: int, epoch: int, seq: int, n: int = 5) -> tuple[int, int]:
    batch = build_batch(
        [Record(0, i, i, f"k{seq + i}".encode(), f"v{seq + i}".encode(), []) for i in range(n)],
        base_timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )
    resp = conn.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        pr.TopicProduceData(name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def end_offset(conn: RawConnection, topic: str) -> int:
    resp = conn.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[lr.ListOffsetsTopic(
        name=topic, partitions=[lr.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return resp.topics[0].partitions[0].offset


def test_duplicates_written_once_gaps_and_stale_epochs_refused(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        conn = RawConnection(b.port, "idem-test")
        created = conn.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="idem")],
                                                   allow_auto_topic_creation=True))
        assert created.topics[0].error_code == 0  # Produce does not create topics; Metadata does
        init = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                      producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
        pid = init.producer_id
        assert produce(conn, "idem", pid, 0, 0) == (0, 0)
        assert produce(conn, "idem", pid, 0, 5) == (0, 5)
        # resends of either of the last batches: success with the original offsets, no write
        assert produce(conn, "idem", pid, 0, 0) == (0, 0)
        assert produce(conn, "idem", pid, 0, 5) == (0, 5)
        assert end_offset(conn, "idem") == 10
        # a gap in the sequence
        assert produce(conn, "idem", pid, 0, 20)[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        # an epoch bump restarts the sequence at 0; the old epoch is then stale
        assert produce(conn, "idem", pid, 1, 0) == (0, 10)
        assert produce(conn, "idem", pid, 0, 10)[0] == 47  # INVALID_PRODUCER_EPOCH
        assert end_offset(conn, "idem") == 15
        # a second producer id is independent
        other = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1)).producer_id
        assert other != pid
        assert produce(conn, "idem", other, 0, 0) == (0, 15)
        conn.close()
    finally:
        b.kill()  # unclean: the producer state must be rebuilt from the log
    b2 = BrokerProcess(tmp_path / "data", port=b.port).start()
    try:
        conn = RawConnection(b2.port, "idem-test")
        assert produce(conn, "idem", pid, 1, 0) == (0, 10)  # still recognised as a duplicate
        assert end_offset(conn, "idem") == 20
        assert produce(conn, "idem", pid, 1, 5) == (0, 20)
        fresh = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1)).producer_id
        assert fresh not in (pid, other)  # ids are never reused across restarts
        conn.close()
    finally:
        b2.stop()
