"""ListTransactions (key 66), versions 0-1: the transactional ids this broker coordinates
(KIP-664; `kafka-transactions.sh list` and find-hanging ask every broker), as Kafka 3.9's
handleListTransactionsRequest / TransactionStateManager.listTransactionStates.

* COORDINATOR_LOAD_IN_PROGRESS while any `__transaction_state` partition loads here;
  COORDINATOR_NOT_AVAILABLE before the coordinator started (Kafka's isActive).
* Every id of the partitions loaded here but the Dead ones, narrowed by `producer_id_filters`
  and `state_filters` (Kafka's state names, case-sensitive; a name that is no state comes back in
  `unknown_state_filters` and matches nothing); v1's `duration_filter` (KIP-994, -1: none) keeps
  the transactions started more than that many milliseconds ago.
* Only the ids the caller may DESCRIBE (TRANSACTIONAL_ID) are listed.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from protocol.messages.list_transactions_response import TransactionState


@api(66, 0, 1)
async def handle(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    coordinator = ctx.server.transaction_coordinator
    if coordinator is None:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    listing = coordinator.handle_list_transactions(set(req.producer_id_filters), req.state_filters,
                                                   req.duration_filter if ctx.version >= 1 else -1)
    # only the ids the caller may DESCRIBE (Kafka's handleListTransactionsRequest)
    described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                     (m.transactional_id for m in listing.transactions))
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=listing.error, unknown_state_filters=list(listing.unknown_state_filters),
        transaction_states=[TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                             transaction_state=m.state.state_name)
                            for m in listing.transactions if m.transactional_id in described])
