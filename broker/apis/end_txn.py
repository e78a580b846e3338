"""EndTxn (key 26), versions 0-4: a transactional producer commits (`committed`) or aborts its
transaction (Kafka's handleEndTxnRequest). The transaction coordinator writes PrepareCommit /
PrepareAbort to `__transaction_state` with acks=all and answers NONE, as Kafka does; a retry
after the transaction completed the same way is NONE, the other way INVALID_TXN_STATE; one
while it completes CONCURRENT_TRANSACTIONS. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for
v0-1. The marker sender (broker/txn/markers.py) then writes the markers on the transaction's
partitions and CompleteCommit / CompleteAbort.
v5 (KIP-890 part 2) is unstable in Kafka 3.9 and not served.
"""

from __future__ import annotations

from broker.apis.add_partitions_to_txn import fenced_for_version
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from broker.txn.decisions import TransactionResult
from protocol.errors import ErrorCode
from protocol.messages import EndTxnRequest, EndTxnResponse


@api(26, 0, 4)
async def handle(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = TransactionResult.COMMIT if req.committed else TransactionResult.ABORT
    error = await ctx.server.transaction_coordinator.handle_end_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, result)
    return EndTxnResponse(throttle_time_ms=0, error_code=fenced_for_version(error, ctx.version))
