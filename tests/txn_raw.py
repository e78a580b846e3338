"""A raw transactional producer and a transaction coordinator's marker requests, for tests of the
partition side of transactions: batches with the transactional flag, producer id/epoch and
sequences built with protocol.records, WriteTxnMarkers as a coordinator sends it, and the
observable results (ListOffsets per isolation level, read_committed Fetch's aborted list)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import list_offsets_request as lr
from protocol.messages import offset_fetch_request as ofr
from protocol.messages import produce_request as pr
from protocol.messages import txn_offset_commit_request as tocr
from protocol.messages import write_txn_markers_request as wr
from protocol.records import Record, build_batch
from storage.txn_index import AbortedTxn, TransactionIndex
from tests.raw_client import RawConnection

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# the partition-side tests play the transaction coordinator themselves (their producer ids come
# from a non-transactional InitProducerId): no coordinator knows their transactions, so the
# broker must not verify them with one (KIP-890), as a Kafka run with this setting
NO_VERIFICATION = "transaction.partition.verification.enable=false"
TopicPartition = tuple[str, int]


def create_topic(conn: RawConnection, name: str, partitions: int, replication_factor: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    resp = conn.call(19, 7, CreateTopicsRequest(topics=[ct.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=30000, validate_only=False))
    assert resp.topics[0].error_code == 0, resp.topics[0]


def init_producer_id(conn: RawConnection) -> int:
    """A producer id (epoch 0) from InitProducerId without a transactional id: enough for the
    storage side, which knows producers by id and epoch only."""
    resp = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1))
    assert resp.error_code == 0, resp
    return resp.producer_id


class TxnProducer:
    """One producer id's transactional batches, its sequence per partition kept as a real
    producer keeps it."""

    def __init__(self, conn: RawConnection, producer_id: int, epoch: int = 0, transactional_id: str = "txn") -> None:
        self.conn = conn
        self.producer_id = producer_id
        self.epoch = epoch
        self.transactional_id = transactional_id
        self.sequences: dict[TopicPartition, int] = {}

    def send(self, tp: TopicPartition, values: list[str], conn: RawConnection | None = None,
             timestamp_ms: int | None = None) -> tuple[int, int]:
        """(error, base offset) of one transactional batch of ``values`` (keys k-<value>), on
        ``conn`` (the partition leader's) or the producer's own connection, its records
        timestamped ``timestamp_ms`` (default: now)."""
        seq = self.sequences.get(tp, 0)
        batch = build_batch(
            [Record(0, i, i, f"k-{v}".encode(), v.encode(), []) for i, v in enumerate(values)],
            base_timestamp=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms, producer_id=self.producer_id, producer_epoch=self.epoch,
            base_sequence=seq, is_transactional=True)
        resp = (conn or self.conn).call(0, 9, ProduceRequest(transactional_id=self.transactional_id, acks=-1, timeout_ms=10000,
                                                   topic_data=[pr.TopicProduceData(name=tp[0], partition_data=[
                                                       pr.PartitionProduceData(index=tp[1], records=batch)])]))
        part = resp.responses[0].partition_responses[0]
        if part.error_code == 0:
            self.sequences[tp] = seq + len(values)
        return part.error_code, part.base_offset


def write_markers(conn: RawConnection, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  tps: list[TopicPartition], version: int = 1) -> dict[TopicPartition, int]:
    """One WriteTxnMarkers marker as a coordinator sends it; the error code per partition."""
    topics: dict[str, list[int]] = {}
    for topic, index in tps:
        topics.setdefault(topic, []).append(index)
    resp = conn.call(27, version, WriteTxnMarkersRequest(markers=[wr.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[wr.WritableTxnMarkerTopic(name=t, partition_indexes=p) for t, p in topics.items()])]))
    (result,) = resp.markers
    assert result.producer_id == producer_id
    return {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}


def txn_offset_commit(conn: RawConnection, group: str, producer_id: int, producer_epoch: int,
                      offsets: dict[TopicPartition, int], *, version: int = 3, member_id: str = "",
                      generation_id: int = -1, instance: str | None = None,
                      transactional_id: str = "txn") -> dict[TopicPartition, int]:
    """One TxnOffsetCommit as a transactional producer's sendOffsetsToTransaction sends it; the
    error code per partition."""
    topics: dict[str, list[tocr.TxnOffsetCommitRequestPartition]] = {}
    for (topic, index), offset in offsets.items():
        topics.setdefault(topic, []).append(tocr.TxnOffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=f"m{offset}"))
    resp = conn.call(28, version, TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group, producer_id=producer_id, producer_epoch=producer_epoch,
        generation_id=generation_id, member_id=member_id, group_instance_id=instance,
        topics=[tocr.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_offsets(conn: RawConnection, group: str, tps: list[TopicPartition] | None, *, require_stable: bool = False,
                  version: int = 7) -> dict[TopicPartition, tuple[int, int]]:
    """OffsetFetch (v7, or v8 batched): (committed offset, error code) per partition; `tps` None
    asks for every committed partition. A group error fails the call."""
    topics: dict[str, list[int]] | None = None
    if tps is not None:
        topics = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
    if version >= 8:
        resp = conn.call(9, version, OffsetFetchRequest(require_stable=require_stable, groups=[ofr.OffsetFetchRequestGroup(
            group_id=group, topics=None if topics is None else [
                ofr.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])]))
        (g,) = resp.groups
        assert g.error_code == 0, g
        return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in g.topics for p in t.partitions}
    resp = conn.call(9, version, OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=None if topics is None else [
        ofr.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()]))
    assert resp.error_code == 0, resp
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions}


def list_offset(conn: RawConnection, tp: TopicPartition, isolation_level: int) -> int:
    """ListOffsets' latest offset: the last stable offset for read_committed, else the high
    watermark."""
    resp = conn.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        lr.ListOffsetsTopic(name=tp[0], partitions=[lr.ListOffsetsPartition(partition_index=tp[1], timestamp=-1)])]))
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.offset


def fetch_committed(conn: RawConnection, tp: TopicPartition) -> tuple[int, list[tuple[int, int]]]:
    """A read_committed Fetch from offset 0: (last stable offset, aborted transactions as
    (producer id, first offset)) -- what the consumer gets from the ``.txnindex``."""
    resp = conn.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                         isolation_level=READ_COMMITTED, topics=[fr.FetchTopic(
                                             topic=tp[0], partitions=[fr.FetchPartition(
                                                 partition=tp[1], fetch_offset=0, partition_max_bytes=1 << 20)])]))
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0, part
    return part.last_stable_offset, [(a.producer_id, a.first_offset) for a in part.aborted_transactions]


def indexed_aborts(log_dir: Path, tp: TopicPartition) -> list[AbortedTxn]:
    """The aborted transactions in the partition's ``.txnindex`` files on disk, in order (read
    while the broker runs: index entries are written through at the append)."""
    out: list[AbortedTxn] = []
    for path in sorted((log_dir / f"{tp[0]}-{tp[1]}").glob("*.txnindex")):
        index = TransactionIndex(int(path.name.split(".")[0]), path)
        try:
            out += index.all_aborted_txns()
        finally:
            index.close()
    return out


def drain(poll: Callable[[], list[str]], want: int, settle_s: float = 1.5, limit_s: float = 30.0) -> list[str]:
    """Values from ``poll()`` (a list per call, waiting a little) until ``want`` arrived and
    nothing more came for ``settle_s`` -- so that an extra record would be seen -- bounded by
    ``limit_s``."""
    got: list[str] = []
    deadline = time.monotonic() + limit_s
    quiet_since = None
    while time.monotonic() < deadline:
        batch = poll()
        if batch:
            got += batch
            quiet_since = None
        elif len(got) >= want:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle_s:
                break
    return got


def confluent_values(bootstrap: str, tps: list[TopicPartition], want: int,
                     isolation: str = "read_committed") -> list[str]:
    """The values a confluent-kafka (librdkafka) consumer with ``isolation.level`` reads from the
    start of ``tps`` (assigned, nothing committed), sorted; see :func:`drain`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cg-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])

        def poll() -> list[str]:
            m = consumer.poll(0.2)
            if m is None:
                return []
            assert m.error() is None, m.error()
            return [m.value().decode()]

        return sorted(drain(poll, want))
    finally:
        consumer.close()
