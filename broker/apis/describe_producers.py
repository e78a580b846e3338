"""DescribeProducers (key 61), version 0: the active producers of partitions (KIP-664), which
`kafka-transactions.sh describe-producers` and find-hanging read (Kafka 3.9's
handleDescribeProducersRequest).

* A topic the caller may not READ: TOPIC_AUTHORIZATION_FAILED for each of its partitions,
  decided before the metadata is looked at (so an unauthorised caller cannot tell whether the
  topic exists, as Kafka's order of checks).
* A topic this broker's metadata does not know: UNKNOWN_TOPIC_OR_PARTITION for each of its
  partitions (no topic-name validation, as Kafka 3.9).
* A known topic's partition as ReplicaManager.activeProducerState: not hosted here
  NOT_LEADER_OR_FOLLOWER (a partition of the cluster) or UNKNOWN_TOPIC_OR_PARTITION (none),
  on a failed log dir KAFKA_STORAGE_ERROR; hosted, its log's producers, on a follower as on the
  leader (Kafka does not check leadership: the admin client sends to the leader).
* Each producer: its id and epoch, last sequence (-1 with no batch retained), last timestamp,
  coordinator epoch of its last marker, and the first offset of its open transaction (-1 when
  none: the field find-hanging and `abort` read).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.describe_producers_response import (
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


async def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    try:
        partition = ctx.server.replica_manager.get_partition(topic, index)
    except KafkaProtocolError as e:
        return PartitionResponse(partition_index=index, error_code=e.code)
    producers = [
        ProducerState(producer_id=s.producer_id, producer_epoch=s.producer_epoch, last_sequence=s.last_seq,
                      last_timestamp=s.last_timestamp, coordinator_epoch=s.coordinator_epoch,
                      current_txn_start_offset=-1 if s.current_txn_first_offset is None else s.current_txn_first_offset)
        for s in await partition.active_producers()
    ]
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, active_producers=producers)


@api(61, 0, 0)
async def handle(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    readable = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.name not in readable
                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if ctx.server.metadata_cache.topic(t.name) is None
                 else None)
        if error is not None:
            partitions = [PartitionResponse(partition_index=i, error_code=error) for i in t.partition_indexes]
        else:
            partitions = [await _partition(ctx, t.name, i) for i in t.partition_indexes]
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
