"""Produce (key 0): advertised 0-11, implemented 3-11 (RecordBatch v2 only).

* v0-2 carry message-set v0/v1 records; they are answered per partition with
  UNSUPPORTED_VERSION (old librdkafka enables compression only when the range includes 0).
* acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=0 gets no response at all; the
  connection still keeps its response order.
* Each partition's records stay opaque bytes: the log validates the batch headers and CRCs,
  rewrites base offsets in place and appends (see storage.log). Errors are per partition:
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, INVALID_RECORD,
  MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, NOT_ENOUGH_REPLICAS, and the idempotence errors.
* An internal topic (`__consumer_offsets`, `__transaction_state`) is written by its coordinator
  only: a Produce to it gets INVALID_TOPIC_EXCEPTION with no error message and offsets -1, as
  Kafka's ReplicaManager.appendToLocalLog answers, unless its client id is Kafka's admin client
  id `__admin_client` (KafkaApis' internalTopicsAllowed).
* Authorization (with an authorizer), as KafkaApis.handleProduceRequest: transactional batches
  need WRITE on the TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every
  partition, as for transactional batches without a transactional id); a topic without WRITE is
  TOPIC_AUTHORIZATION_FAILED on each of its partitions, before it is looked up. IDEMPOTENT_WRITE
  is not checked here in 3.9 (InitProducerId does, KIP-679).
* Before the append, as Kafka's KafkaApis: v3+ records
  must be exactly one batch of magic 2 (ProduceRequest.validateRecords: INVALID_RECORD, or
  CORRUPT_MESSAGE for a length or magic no batch can have), zstd needs v7+.
* Per-record checks (Kafka's LogValidator: keys on compacted topics, CreateTime timestamps
  within message.timestamp.before/after.max.ms, no LogAppendTime batches from producers) look
  at every record and refuse the whole batch: INVALID_RECORD, or INVALID_TIMESTAMP when a
  timestamp is among the reasons. v8+ (KIP-467) also lists each bad record in record_errors
  (batch_index and Kafka's message) and puts the summary in error_message, so that a client
  fails those records with their own error (Kafka 3.9's producers fail the batch's other
  records too, with a generic error naming the invalid ones; they are not retried).
* KIP-890 part 1 (transaction.partition.verification.enable, on by default as in Kafka 3.9): a
  transactional batch of a producer whose transaction has no data on the partition yet is
  appended only once the transaction coordinator confirmed the partition is in the ongoing
  transaction (broker/transaction_verification.py): else INVALID_TXN_STATE "Partition was not
  added to the transaction" (TRANSACTION_ABORTABLE for v11, whose clients know it), a fenced
  epoch INVALID_PRODUCER_EPOCH, the coordinator's retriable errors NOT_ENOUGH_REPLICAS.
* A non-transactional batch of a producer with an ongoing transaction on the partition is
  INVALID_TXN_STATE; a batch of an older epoch INVALID_PRODUCER_EPOCH (the producer state).
* acks=-1 completes when every ISR member has the data (a DelayedProduce in the produce
  purgatory, REQUEST_TIMED_OUT after timeout_ms); with one node that is right after the append.
* producer_byte_rate (broker/quota): the request's size is recorded after the append against the
  client's quota; over it, throttle_time_ms is Kafka's throttle time and the connection is muted
  for it after the response (KIP-219), acks=0 included.
* ZooKeeper mode: a partition this broker does not lead is NOT_LEADER_OR_FOLLOWER, and v10+
  (KIP-951) also name the current leader and its epoch in current_leader and the leader's
  endpoint on the client's listener in node_endpoints (Kafka's getCurrentLeader: this broker's
  view of the partition if it hosts it, else the metadata cache's), so the client can go there
  without a Metadata round trip.
"""

from __future__ import annotations

import struct
from typing import Any

from broker.apis.registry import api
from broker.context import RequestContext
from broker.replica_manager import ProduceResult
from broker.security.acl import AclOperation, ResourceType
from protocol.compression import CODEC_ZSTD
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import ProduceRequest, ProduceResponse
from protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from protocol.records import ATTRIBUTES, COMPRESSION_MASK, LOG_OVERHEAD, MAGIC, TRANSACTIONAL_MASK

HEADER_SIZE_UP_TO_MAGIC = 17  # Kafka's Records.HEADER_SIZE_UP_TO_MAGIC
# Kafka's AdminUtils.ADMIN_CLIENT_ID: the one client id whose Produce may append to an internal topic
ADMIN_CLIENT_ID = "__admin_client"
RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest length any batch has
_INT32 = struct.Struct(">i")


def _next_batch(buf: Any, pos: int) -> tuple[int, int] | None:
    """(magic, size) of the batch at `pos` as Kafka's ByteBufferLogInputStream.nextBatch sees
    it: None when the rest is too short to hold it; CORRUPT_MESSAGE for a length or magic that
    no batch can have."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, pos + 8)
    if length < RECORD_OVERHEAD_V0:
        raise KafkaProtocolError(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record size {length} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
        )
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = struct.unpack_from(">b", buf, pos + MAGIC)[0]
    if not 0 <= magic <= 2:
        raise KafkaProtocolError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    return None if remaining < size else (magic, size)


def validate_records(version: int, records: Any) -> None:
    """Kafka's ProduceRequest.validateRecords: v3+ carries exactly one record batch of magic 2
    per partition (zstd from v7), checked before the log sees the bytes, so that an empty,
    truncated or doubled payload is refused rather than silently appending nothing or two
    batches. Null records are left to the append (CORRUPT_MESSAGE there)."""
    if records is None:
        return
    first = _next_batch(records, 0)
    if first is None:
        raise KafkaProtocolError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} must have at least one record batch per partition",
        )
    magic, size = first
    if magic != 2:
        raise KafkaProtocolError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain record batches "
            "with magic version 2",
        )
    if version < 7 and len(records) > ATTRIBUTES + 1 and records[ATTRIBUTES + 1] & COMPRESSION_MASK == CODEC_ZSTD:
        raise KafkaProtocolError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {version} are not allowed to use ZStandard compression",
        )
    if _next_batch(records, size) is not None:
        raise KafkaProtocolError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain exactly one "
            "record batch per partition",
        )


def _is_transactional(records: Any) -> bool:
    """ProduceRequest.hasTransactionalRecords, for one partition's records."""
    try:
        first = _next_batch(records, 0) if records is not None else None
    except KafkaProtocolError:
        return False
    return first is not None and first[0] == 2 and bool(records[ATTRIBUTES + 1] & TRANSACTIONAL_MASK)


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


@api(0, 0, 11, eager=True)
async def handle(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    if ctx.version < 3:
        return _error_response(req, ErrorCode.UNSUPPORTED_VERSION)
    if req.acks not in (-1, 0, 1):
        return _error_response(req, ErrorCode.INVALID_REQUIRED_ACKS)
    secured = ctx.server.authorizer is not None  # the hot path without an authorizer checks nothing more
    if (req.transactional_id is None or secured) and any(
        _is_transactional(p.records) for t in req.topic_data for p in t.partition_data
    ) and (
        req.transactional_id is None
        or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    ):
        return _error_response(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    authorized = (ctx.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data))
                  if secured else None)
    rm = ctx.server.replica_manager
    entries = []
    invalid: dict[tuple[str, int], Any] = {}
    for t in req.topic_data:
        for p in t.partition_data:
            tp = (t.name, p.index)
            if authorized is not None and t.name not in authorized:
                invalid[tp] = ProduceResult(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            if tp in rm.partitions:  # an unknown partition is answered by the append
                try:
                    validate_records(ctx.version, p.records)
                except KafkaProtocolError as e:
                    invalid[tp] = ProduceResult(error=e.code)  # Kafka: no message, no offsets
                    continue
            entries.append((tp, p.records))
    results = await rm.append_records(entries, req.acks, timeout_ms=req.timeout_ms,
                                      order=ctx.connection.append_order,
                                      internal_topics_allowed=ctx.client_id == ADMIN_CLIENT_ID,
                                      transactional_id=req.transactional_id, produce_version=ctx.version)
    results.update(invalid)
    # producer_byte_rate: the request's bytes, after the append (KafkaApis); acks=0 is muted too
    throttle_ms = ctx.record_quota(ctx.server.quotas.produce, ctx.size)
    if req.acks == 0:
        return None
    responses = []
    endpoints: dict[int, NodeEndpoint] = {}
    kip_951 = ctx.version >= 10 and ctx.server.zk_mode
    for t in req.topic_data:
        parts = []
        for p in t.partition_data:
            r = results[(t.name, p.index)]
            leader = LeaderIdAndEpoch()
            if kip_951 and r.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader = current_leader(ctx, (t.name, p.index), endpoints)
            parts.append(
                PartitionProduceResponse(
                    index=p.index,
                    error_code=r.error,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.log_append_time,
                    log_start_offset=r.log_start_offset,
                    record_errors=[
                        BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                        for i, m in r.record_errors
                    ]
                    if r.record_errors
                    else [],
                    error_message=r.message if r.error else None,
                    current_leader=leader,
                )
            )
        responses.append(TopicProduceResponse(name=t.name, partition_responses=parts))
    return ProduceResponse(throttle_time_ms=throttle_ms, responses=responses,
                           node_endpoints=list(endpoints.values()))


def current_leader(ctx: RequestContext, tp: tuple[str, int], endpoints: dict[int, NodeEndpoint]) -> LeaderIdAndEpoch:
    """Kafka's KafkaApis.getCurrentLeader: (leader, epoch) from the hosted partition, else the
    metadata cache, else (-1, -1); the leader's endpoint on the client's listener, when it is a
    live broker, goes into `endpoints`."""
    rm = ctx.server.replica_manager
    hosted = rm.partitions.get(tp)
    cached = ctx.server.metadata_cache.partition(*tp)
    if hosted is not None:
        leader_id, epoch = hosted.state.leader, hosted.leader_epoch
    elif tp in rm.empty_partitions:  # Kafka's Partition object without a leader or a log
        leader_id, epoch = -1, -1
    elif cached is not None:
        leader_id, epoch = cached.leader, cached.leader_epoch
    else:
        leader_id, epoch = -1, -1
    broker = ctx.server.metadata_cache.brokers.get(leader_id)
    ep = broker.endpoint(ctx.connection.listener.name) if broker is not None else None
    if ep is not None:
        endpoints[leader_id] = NodeEndpoint(node_id=leader_id, host=ep[0], port=ep[1], rack=broker.rack)
    return LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)
