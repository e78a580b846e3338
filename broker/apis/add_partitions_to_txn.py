"""AddPartitionsToTxn (key 24), versions 0-5: a transactional producer adds partitions to its
transaction before it produces to them (Kafka's handleAddPartitionToTxnRequest).

* v0-3 (clients): one transaction. A partition of an internal topic (`__consumer_offsets`,
  `__transaction_state`: a client adds a group's offsets with AddOffsetsToTxn) is
  TOPIC_AUTHORIZATION_FAILED, a partition this broker's metadata does not know
  UNKNOWN_TOPIC_OR_PARTITION, and with either every other partition of the request
  OPERATION_NOT_ATTEMPTED: nothing is added.
* Otherwise the transaction coordinator decides (broker/txn/coordinator.py) and every partition
  gets its one answer: NONE once Ongoing with the partitions is written to `__transaction_state`
  (or at once when they are all in the transaction already); INVALID_PRODUCER_ID_MAPPING,
  PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for v0-1, which do not know it),
  CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...
* v4-5 (KIP-890, sent by brokers): a batch of transactions, each answered in
  `results_by_transaction`; internal topics are not refused there. A transaction with
  `verify_only` is checked, not changed: NONE per partition in the transaction,
  TRANSACTION_ABORTABLE per partition not in it, or one error for all (Kafka's
  handleVerifyPartitionsInTransaction).
* Authorization: v0-3 need WRITE on the TRANSACTIONAL_ID (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else TOPIC_AUTHORIZATION_FAILED, the
  others OPERATION_NOT_ATTEMPTED); v4+ CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from controller.image import INTERNAL_TOPICS
from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

TopicPartition = tuple[str, int]


def fenced_for_version(error: int, version: int, first_with_fenced: int = 2) -> int:
    """PRODUCER_FENCED as versions before `first_with_fenced` know it: INVALID_PRODUCER_EPOCH
    (KafkaApis maps it so for AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v0-1)."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _results(errors: dict[TopicPartition, int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=error))
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=r) for t, r in by_topic.items()]


async def _transaction(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                       topics: Iterable[object], verify_only: bool) -> dict[TopicPartition, int]:
    """One transaction's partitions and their answers."""
    partitions = list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))  # type: ignore[attr-defined]
    if ctx.version < 4 and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = (ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, (tp[0] for tp in partitions))
                if ctx.version < 4 else {tp[0] for tp in partitions})
    cache = ctx.server.metadata_cache
    refused: dict[TopicPartition, int] = {}
    for tp in partitions:
        if tp[0] not in writable or (ctx.version < 4 and tp[0] in INTERNAL_TOPICS):
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif cache.partition(*tp) is None:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    coordinator = ctx.server.transaction_coordinator
    if verify_only:
        return coordinator.handle_verify_partitions_in_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
    error = await coordinator.handle_add_partitions_to_transaction(
        transactional_id, producer_id, producer_epoch, partitions)
    return dict.fromkeys(partitions, fenced_for_version(error, ctx.version))


@api(24, 0, 5)
async def handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.version < 4:
        errors = await _transaction(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                    req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(errors))
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):  # v4+ come from brokers
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    results = []
    for txn in req.transactions:
        errors = await _transaction(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                    txn.verify_only)
        results.append(AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_results(errors)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_transaction=results)
