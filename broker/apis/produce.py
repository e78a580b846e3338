"""Produce (key 0): advertised 0-11, implemented 3-11 (RecordBatch v2 only).

* v0-2 carry message-set v0/v1 records; they are answered per partition with
  UNSUPPORTED_VERSION (old librdkafka enables compression only when the range includes 0).
* acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=0 gets no response at all; the
  connection still keeps its response order.
* Each partition's records stay opaque bytes: the log validates the batch headers and CRCs,
  rewrites base offsets in place and appends (see storage.log). Errors are per partition:
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, INVALID_RECORD,
  MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, NOT_ENOUGH_REPLICAS, and the idempotence errors.
* acks=-1 completes when every ISR member has the data (a DelayedProduce in the produce
  purgatory, REQUEST_TIMED_OUT after timeout_ms); with one node that is right after the append.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest, ProduceResponse
from protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse


def _error_response(req: ProduceRequest, code: int) -> ProduceResponse:
    return ProduceResponse(
        throttle_time_ms=0,
        responses=[
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1, log_start_offset=-1)
                    for p in t.partition_data
                ],
            )
            for t in req.topic_data
        ],
    )


@api(0, 0, 11)
async def handle(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    if ctx.version < 3:
        return _error_response(req, ErrorCode.UNSUPPORTED_VERSION)
    if req.acks not in (-1, 0, 1):
        return _error_response(req, ErrorCode.INVALID_REQUIRED_ACKS)
    rm = ctx.server.replica_manager
    entries = [((t.name, p.index), p.records) for t in req.topic_data for p in t.partition_data]
    results = await rm.append_records(entries, req.acks, timeout_ms=req.timeout_ms)
    if req.acks == 0:
        return None
    responses = []
    for t in req.topic_data:
        parts = []
        for p in t.partition_data:
            r = results[(t.name, p.index)]
            parts.append(
                PartitionProduceResponse(
                    index=p.index,
                    error_code=r.error,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.log_append_time,
                    log_start_offset=r.log_start_offset,
                    error_message=r.message if r.error else None,
                )
            )
        responses.append(TopicProduceResponse(name=t.name, partition_responses=parts))
    return ProduceResponse(throttle_time_ms=0, responses=responses)
