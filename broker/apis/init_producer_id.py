"""InitProducerId (key 22), versions 0-4: idempotent producers.

Without a transactional id every call allocates a fresh producer id with epoch 0 (Kafka does the
same, including for the v3+ KIP-360 re-initialisation of an idempotent producer). Ids come from
blocks persisted by the controller before use, so a restart never reuses one. Transactional ids
need the transaction coordinator, which this broker does not run yet: such requests get
COORDINATOR_NOT_AVAILABLE (FindCoordinator for transactions is not advertised either).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdRequest, InitProducerIdResponse


@api(22, 0, 4)
async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
        )
    pid = await ctx.server.controller.allocate_producer_id()
    failed = await ctx.committed()  # the id block is durable before the id is used
    if failed is not None:  # not durable: a restart could hand the id out again
        return InitProducerIdResponse(throttle_time_ms=0, error_code=failed.code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
