"""InitProducerId (key 22), versions 0-4: idempotent and transactional producers.

* Without a transactional id every call allocates a fresh producer id with epoch 0 (Kafka does
  the same, including for the v3+ KIP-360 re-initialisation of an idempotent producer). Ids
  come from blocks persisted by the controller before use, so a restart never reuses one.
* With one, the transaction coordinator answers (broker/txn/coordinator.py): an empty id is
  INVALID_REQUEST, a `transaction_timeout_ms` above `transaction.max.timeout.ms`
  INVALID_TRANSACTION_TIMEOUT, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker
  does not coordinate the id now; else the id's producer id and its bumped epoch, once the Empty
  state is written to `__transaction_state` with acks=all. An open transaction is fenced and
  aborted (CONCURRENT_TRANSACTIONS meanwhile; the abort cannot complete until the coordinator
  sends markers, which it does not yet).
* v3+ carry the caller's producer id and epoch (KIP-360): both -1, or both set (one of them -1
  is INVALID_REQUEST, as Kafka); a producer replaced by another gets PRODUCER_FENCED, which
  v0-3 clients get as INVALID_PRODUCER_EPOCH (they do not know the newer code).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from broker.txn.decisions import ProducerIdAndEpoch
from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID


def _response(error: int, producer_id: int = -1, producer_epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=producer_id,
                                  producer_epoch=producer_epoch)


@api(22, 0, 4)
async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    expected: ProducerIdAndEpoch | None = None
    if ctx.version >= 3:
        given = (req.producer_id == NO_PRODUCER_ID, req.producer_epoch == NO_PRODUCER_EPOCH)
        if given[0] != given[1]:
            return _response(ErrorCode.INVALID_REQUEST)
        if not given[0]:
            expected = ProducerIdAndEpoch(req.producer_id, req.producer_epoch)
    if req.transactional_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        result = await ctx.server.transaction_coordinator.handle_init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, expected)
        error = result.error
        if error == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return _response(error, result.producer_id, result.producer_epoch)
    if not ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) and not ctx.authorize_by_resource_type(
            AclOperation.WRITE, ResourceType.TOPIC):  # KIP-679: WRITE on any topic is enough
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid = await ctx.server.controller.allocate_producer_id()
    failed = await ctx.committed()  # the id block is durable before the id is used
    if failed is not None:  # not durable: a restart could hand the id out again
        return _response(failed.code)
    return _response(ErrorCode.NONE, pid, 0)
