"""AddOffsetsToTxn (key 25), versions 0-4: a transactional producer that will commit a
consumer group's offsets in its transaction (sendOffsetsToTransaction) adds the group's
`__consumer_offsets` partition -- `abs(javaHash(group)) % partitions` -- to the transaction,
through the transaction coordinator exactly as AddPartitionsToTxn adds a partition (Kafka's
handleAddOffsetsToTxnRequest). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for v0-1. The offsets
themselves come with TxnOffsetCommit, to the group coordinator (broker/apis/txn_offset_commit.py).
"""

from __future__ import annotations

from broker.apis.add_partitions_to_txn import fenced_for_version
from broker.apis.registry import api
from broker.context import RequestContext
from broker.group.coordinator import GROUP_METADATA_TOPIC
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


@api(25, 0, 4)
async def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    offsets_partition = (GROUP_METADATA_TOPIC, ctx.server.group_coordinator.partition_for(req.group_id))
    error = await ctx.server.transaction_coordinator.handle_add_partitions_to_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, [offsets_partition])
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_for_version(error, ctx.version))
