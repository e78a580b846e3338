"""ListOffsets on a new leader whose high watermark has not caught up (KIP-207, Kafka's
Partition.fetchOffsetForTimestamp): a consumer's "latest" gets OFFSET_NOT_AVAILABLE (retriable)
until the high watermark reaches the offset the leader's epoch started at, instead of an end that
can be behind what the previous leader answered (Spark's kafka sources take an end going back for
lost data and fail the query).

The lag is made certain: broker 3 is a RecordingBroker (registered in ZooKeeper, answers the
controller, never fetches), so while it is in the ISR no leader's high watermark moves; broker 2
copies records broker 1 took with acks=1 and becomes leader at their end when broker 1 is killed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import (
    CreateTopicsRequest,
    DescribeLogDirsRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from protocol.messages import create_topics_request as ctq
from protocol.messages import produce_request as pr
from protocol.messages.describe_log_dirs_request import DescribableLogDirTopic
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.records import Record, build_batch
from tests.cluster.processes import PROMISE_S, WAIT, partitions, running_cluster
from tests.cluster.recording_broker import RecordingBroker
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

TOPIC = "kip207"
N = 10
EARLIEST, LATEST = -2, -1


def list_offset(port: int, timestamp: int, version: int = 7, replica_id: int = -1) -> tuple[int, int]:
    """(error code, offset) of partition 0 of TOPIC."""
    with RawConnection(port) as conn:
        resp = conn.call(2, version, ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[
            ListOffsetsTopic(name=TOPIC, partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]))
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset


# Raw requests, not kafka-python: its clients may pick broker 3, which answers no Metadata.
def create_topic(port: int) -> int:
    """TOPIC with partition 0 on [1, 2, 3], sent to the controller; the error code."""
    with RawConnection(port) as conn:
        resp = conn.call(19, 5, CreateTopicsRequest(timeout_ms=20_000, topics=[ctq.CreatableTopic(
            name=TOPIC, num_partitions=-1, replication_factor=-1,
            assignments=[ctq.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])])]))
    return resp.topics[0].error_code


def produce_acks_1(port: int) -> tuple[int, int]:
    """N records in one batch with acks=1 (acks=all would wait for broker 3); error, base offset."""
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pr.TopicProduceData(name=TOPIC, partition_data=[
        pr.PartitionProduceData(index=0, records=build_batch([Record(offset_delta=i, value=b"%d" % i) for i in range(N)]))])])
    with RawConnection(port) as conn:
        p = conn.call(0, 9, req).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def log_size(port: int) -> int:
    with RawConnection(port) as conn:
        resp = conn.call(35, 1, DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic=TOPIC, partitions=[0])]))
    return sum(p.partition_size for d in resp.results for t in d.topics for p in t.partitions)


async def test_a_new_leaders_latest_offset_waits_for_its_high_watermark(zookeeper: ZooKeeperServer,
                                                                        tmp_path: Path) -> None:
    async with running_cluster(zookeeper, tmp_path) as cluster:  # replica.lag.time.max.ms 30 s
        await cluster.start(2)  # first, so the controller: it outlives broker 1
        await cluster.start(1)
        silent = await RecordingBroker(3).start()
        try:
            await silent.register(cluster.connect, session_timeout_ms=4000)
            assert await asyncio.to_thread(create_topic, cluster.ports[2]) == 0
            await cluster.until_all_agree(lambda m: TOPIC in m["topics"] and partitions(m, TOPIC)[0][1] == 1,
                                          "broker 1 leads", among=[1, 2])

            assert await asyncio.to_thread(produce_acks_1, cluster.ports[1]) == (0, 0)
            assert await asyncio.to_thread(list_offset, cluster.ports[1], LATEST) == (0, 0)  # broker 3 has fetched nothing
            deadline = time.monotonic() + WAIT
            while await asyncio.to_thread(log_size, cluster.ports[2]) != await asyncio.to_thread(log_size, cluster.ports[1]):  # broker 2 copies the records
                assert time.monotonic() < deadline, "broker 2 did not copy the records"
                await asyncio.sleep(0.05)

            cluster.brokers[1].kill()
            view = await cluster.until_all_agree(lambda m: partitions(m, TOPIC)[0][1] == 2, "broker 2 leads",
                                                 among=[2], timeout=PROMISE_S + WAIT)
            assert sorted(partitions(view, TOPIC)[0][4]) == [2, 3]
            # its epoch starts at N, its high watermark is 0 (broker 3 in the ISR, silent)
            assert await asyncio.to_thread(list_offset, cluster.ports[2], LATEST) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
            assert await asyncio.to_thread(list_offset, cluster.ports[2], LATEST, version=4) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
            assert await asyncio.to_thread(list_offset, cluster.ports[2], 0) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)  # by time: nothing below it
            assert await asyncio.to_thread(list_offset, cluster.ports[2], EARLIEST) == (0, 0)
            # not a consumer (-2: a debugging tool): no isolation, the log end, as Kafka answers it
            assert await asyncio.to_thread(list_offset, cluster.ports[2], LATEST, replica_id=-2) == (0, N)

            await silent.kill()  # broker 3 leaves the ISR: broker 2 alone, its high watermark is its end
            await cluster.until_all_agree(lambda m: partitions(m, TOPIC)[0][4] == [2], "ISR [2]", among=[2],
                                          timeout=PROMISE_S + WAIT)
            assert await asyncio.to_thread(list_offset, cluster.ports[2], LATEST) == (0, N)
            assert await asyncio.to_thread(list_offset, cluster.ports[2], 0) == (0, 0)
        finally:
            await silent.stop()
