"""DescribeTransactions (key 65), version 0: the coordinator's state of transactional ids
(KIP-664; `kafka-transactions.sh describe`), as Kafka 3.9's handleDescribeTransactionsRequest /
TransactionCoordinator.handleDescribeTransactions.

Per id: INVALID_REQUEST for "", NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker
does not coordinate it now, TRANSACTIONAL_ID_NOT_FOUND when it has no metadata for it (or the id
is Dead, being expired), else NONE with the state's name, timeout, start time (-1 before the
first transaction), producer id and epoch and the transaction's partitions by topic. A
coordinator not started is COORDINATOR_NOT_AVAILABLE (Kafka's isActive). An id the caller may
not DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the partitions listed are only those of
topics the caller may DESCRIBE (Kafka's handleDescribeTransactionsRequest).
"""

from __future__ import annotations

from collections import defaultdict

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.describe_transactions_response import TopicData, TransactionState


def _describe(ctx: RequestContext, transactional_id: str) -> TransactionState:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return TransactionState(transactional_id=transactional_id,
                                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = ctx.server.transaction_coordinator
    if coordinator is None:
        return TransactionState(transactional_id=transactional_id, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    found = coordinator.handle_describe_transactions(transactional_id)
    m = found.metadata
    if m is None:
        return TransactionState(transactional_id=transactional_id, error_code=found.error)
    partitions: dict[str, list[int]] = defaultdict(list)
    described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (tp[0] for tp in m.topic_partitions))
    for topic, index in sorted(m.topic_partitions):
        if topic in described:
            partitions[topic].append(index)
    return TransactionState(
        error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state=m.state.state_name,
        transaction_timeout_ms=m.txn_timeout_ms, transaction_start_time_ms=m.txn_start_timestamp,
        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
        topics=[TopicData(topic=t, partitions=p) for t, p in partitions.items()])


@api(65, 0, 0)
async def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=[_describe(ctx, t) for t in req.transactional_ids])
