"""TxnOffsetCommit (key 28), versions 0-4: a transactional producer commits a consumer group's
offsets inside its transaction (sendOffsetsToTransaction, after AddOffsetsToTxn), to the group
coordinator (Kafka 3.9's KafkaApis.handleTxnOffsetCommitRequest and, in ZooKeeper mode,
GroupCoordinator.handleTxnCommitOffsets).

* Partitions of topics this broker's metadata does not know are UNKNOWN_TOPIC_OR_PARTITION and
  left out; the rest go to the group coordinator. An empty group id is INVALID_GROUP_ID (unlike
  OffsetCommit, Kafka's isValidGroupId accepts it only for the plain offset APIs); then
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for the other group APIs.
* v3+ (KIP-447) names the member: a request with a member id, a generation >= 0 or a group
  instance id is checked as OffsetCommit is (FENCED_INSTANCE_ID for a static instance's old
  member id, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION); one naming none (every v0-2 request) is
  accepted in any group state. An unknown group is created Empty, as Kafka does.
* The offsets are written to the group's `__consumer_offsets` partition as a transactional
  batch of the request's producer id and epoch (acks=all). An older producer epoch than the
  partition has seen is INVALID_PRODUCER_EPOCH, from the log's producer state. The log's errors
  map as Kafka's storeOffsets maps them: COORDINATOR_NOT_AVAILABLE (NOT_ENOUGH_REPLICAS...),
  NOT_COORDINATOR, INVALID_COMMIT_OFFSET_SIZE; metadata over 4096 bytes is
  OFFSET_METADATA_TOO_LARGE.
* Written offsets are pending for the producer, not committed: OffsetFetch answers the previous
  committed offset (UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction
  coordinator's marker reaches the partition (write_txn_markers.py): COMMIT makes them the
  group's committed offsets, ABORT drops them.
* KIP-890 (transaction.partition.verification.enable): unless the producer's transaction
  already wrote offsets to the group's partition, the transaction coordinator must confirm the
  partition is in the transaction (AddOffsetsToTxn added it), else INVALID_TXN_STATE
  (TRANSACTION_ABORTABLE for v4), INVALID_PRODUCER_EPOCH for a fenced producer, or the
  coordinator's error as an offset commit maps it (GroupCoordinator.handle_txn_commit_offsets).
* Not done: authorisation (no authorizer yet).
"""

from __future__ import annotations

from broker.apis.offset_commit import requested_offsets
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)


@api(28, 0, 4)
async def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    denied = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
              if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
              else ErrorCode.GROUP_AUTHORIZATION_FAILED
              if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id) else None)
    if denied is not None:  # TxnOffsetCommitRequest.getErrorResponse: the error for every partition
        errors = {(t.name, p.partition_index): denied for t in req.topics for p in t.partitions}
        offsets = {}
    else:
        errors, offsets = requested_offsets(ctx, req.topics, ctx.version >= 2)
    if offsets:
        v3 = ctx.version >= 3
        errors.update(
            await ctx.server.group_coordinator.handle_txn_commit_offsets(
                req.group_id, req.producer_id, req.producer_epoch,
                req.member_id if v3 else "", req.group_instance_id if v3 else None,
                req.generation_id if v3 else -1, offsets,
                transactional_id=req.transactional_id, api_version=ctx.version,
            )
        )
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (name, index), code in errors.items():
        by_topic.setdefault(name, []).append(TxnOffsetCommitResponsePartition(partition_index=index, error_code=code))
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[TxnOffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )
