"""DeleteRecords (key 21), versions 0-2: move a partition's log start offset forward.

The offset must lie within [log start, high watermark] (-1 means the high watermark);
otherwise OFFSET_OUT_OF_RANGE. Segments wholly below the new start are deleted by the next
retention pass; reads below it get OFFSET_OUT_OF_RANGE at once. The answer's low_watermark is
the new log start offset. On one node every replica (this one) has it immediately, so no
DelayedDeleteRecords is parked. The log work (the leader-epoch checkpoint rewritten, producer
snapshots below the new start removed) runs in an executor, appends to the partition queued
behind it, so the event loop never waits for the disk."""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)


@api(21, 0, 2)
async def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    rm = ctx.server.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            try:
                if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name):
                    raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = rm.get_leader_partition(t.name, p.partition_index)
                log_ = partition.log
                target = log_.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > log_.high_watermark:
                    raise KafkaProtocolError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"Cannot increment the log start offset to {target} of partition "
                        f"{t.name}-{p.partition_index} since it is larger than the high watermark {log_.high_watermark}",
                    )
                # blocking (leader-epoch checkpoint, producer snapshots below it): an executor
                await partition.run_exclusive(log_.maybe_increment_log_start_offset, target)
                out.low_watermark = log_.log_start_offset
            except KafkaProtocolError as e:
                out.error_code = e.code
            parts.append(out)
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
