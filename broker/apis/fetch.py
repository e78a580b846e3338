"""Fetch (key 1), versions 4-12 (13+ would need topic ids in fetch).

* Consumers (replica id -1) read up to the high watermark, or the last stable offset with
  isolation_level=1 (read_committed, with the aborted transactions of the range).
* `partition_max_bytes` bounds each partition and `max_bytes` the whole response, except that
  the first partition with data returns at least one whole batch even when it is larger
  (KIP-74), so a consumer can never be stuck behind a big batch.
* `min_bytes` / `max_wait_ms`: when less than min_bytes is available the request waits in the
  fetch purgatory (a DelayedFetch watching its partitions, re-reading only the partition an
  append wakes it for) until enough is available or max_wait expires, then reads again and
  answers.
* Fetch sessions (KIP-227, v7+): see broker.fetch_session; incremental responses carry only
  partitions with news.
* Authorization (with an authorizer), as KafkaApis.handleFetchRequest: a follower's fetch needs
  CLUSTER_ACTION on the cluster, a consumer's READ on each topic; the others are answered
  TOPIC_AUTHORIZATION_FAILED and neither read nor waited for.
* Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  OFFSET_OUT_OF_RANGE (with log start offset and high watermark filled in),
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale or future current_leader_epoch.
* Replication throttle (broker.replication_quota): a follower outside the ISR gets no records of
  a partition its topic's leader.replication.throttled.replicas names for this broker while the
  leader's throttled byte rate is over leader.replication.throttled.rate.
* consumer_byte_rate (broker/quota), consumers only: the records bytes of the response are
  recorded against the client's quota, the response bounded by what the quota lets through in its
  measured span (max_bytes at most quota x (quota.window.num - 1) x window); over it the response is empty (the bytes taken back, no
  session created or advanced) with Kafka's throttle time, and the connection is muted for it.
  Followers are never client-throttled.
* Fetch from the closest replica (KIP-392). A follower serves consumers too from v11 (those
  versions carry client metadata, and Kafka's FetchParams.fetchOnlyLeader is false for them), up
  to the high watermark it knows (its leader's, as its last fetch brought it): a fetch offset
  above it and up to its log end gets no records (the fetch waits in the purgatory for the high
  watermark to move; Kafka's DelayedFetch answers it empty at once), one past its log end
  OFFSET_OUT_OF_RANGE and a stale current_leader_epoch FENCED_LEADER_EPOCH, both of which send
  Kafka's clients back to the leader. Before v11 a consumer
  gets NOT_LEADER_OR_FOLLOWER from a follower; a debugging client (replica id -2) reads any
  replica up to its log end, as Kafka's. With `replica.selector.class` set, a leader answers a
  consumer's v11+ fetch whose partition the selector gives to a follower (broker.replica_selector:
  an in-sync replica in the client's rack) with that follower's id in preferred_read_replica,
  no records and at once, instead of reading. Operators see it in the log: the leader writes a
  line when the replica it sends a client's partition to changes (to a follower, or back to
  itself), a follower when it first serves a client's partition records.
* Records go out as read from the segment files: opaque bytes, never per-record objects. A
  partition's records of at least STREAM_MIN_BYTES stay a file region (FileRecords) in the
  response, which the connection sends with sendfile when it is its turn (broker.network), so a
  large or unread response never sits in memory; smaller ones are read (one pread) when built.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import structlog

from broker.apis.list_offsets import check_leader_epoch
from broker.apis.registry import api
from broker.context import RequestContext
from broker.fetch_session import PartitionRequest
from broker.replica_selector import NO_PREFERRED_REPLICA, ClientMetadata
from broker.replication_quota import UNLIMITED
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.fetch_lean import NO_CURRENT_LEADER, NO_DIVERGING_EPOCH, NO_SNAPSHOT_ID
from protocol.framing import encode_response_frame
from protocol.messages import FetchRequest, FetchResponse
from protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    PartitionData,
)
from storage.file_records import FileRecords

log = structlog.get_logger("odradek.fetch")

# below this a pread into memory is cheaper than a sendfile round (and bounded anyway)
STREAM_MIN_BYTES = 64 * 1024
CONSUMER_REPLICA_ID = -1  # FetchRequest.CONSUMER_REPLICA_ID; -2 is a debugging client's
# what a read may return up to (Kafka's FetchIsolation)
LOG_END, HIGH_WATERMARK, TXN_COMMITTED = "log_end", "high_watermark", "txn_committed"


class FetchParams(NamedTuple):
    """What every partition read of one Fetch shares (Kafka's FetchParams). A named tuple: one
    is made per fetch, on the replication round's path."""

    replica_id: int
    isolation: str
    client: ClientMetadata | None  # consumers' fetches from v11 (KIP-392's client metadata)

    @classmethod
    def of(cls, ctx: RequestContext, req: FetchRequest) -> FetchParams:
        consumer = req.replica_id == CONSUMER_REPLICA_ID
        isolation = (LOG_END if not consumer else TXN_COMMITTED if req.isolation_level == 1 else HIGH_WATERMARK)
        client = None
        if ctx.version >= 11 and req.replica_id < 0:
            conn = ctx.connection
            client = ClientMetadata(rack_id=req.rack_id or "", client_id=ctx.client_id or "",
                                    client_address=conn.peer if conn is not None else "",
                                    listener_name=conn.listener.name if conn is not None else "")
        return cls(req.replica_id, isolation, client)

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def only_leader(self) -> bool:
        """A follower's fetch, and a consumer's without client metadata (before v11)."""
        return self.replica_id >= 0 or (self.replica_id == CONSUMER_REPLICA_ID and self.client is None)


@dataclass(slots=True)
class PartitionResult:
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # a file slice (read lazily when the response is built) or b""
    records_size: int = 0
    aborted: list[Any] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) for a follower that diverged
    preferred_read_replica: int = NO_PREFERRED_REPLICA  # KIP-392: fetch from that follower instead


def read_partitions(ctx: RequestContext, req: FetchRequest, params: FetchParams,
                    parts: dict[tuple[str, int], PartitionRequest],
                    diverging: dict[tuple[str, int], tuple[int, int]] | None = None,
                    ) -> dict[tuple[str, int], PartitionResult]:
    """Read every partition once, sharing the response byte budget in order (Kafka's readFromLog).
    `diverging`: for a follower's fetch, its partitions whose log diverged from ours (computed
    once per request by ReplicaManager.record_follower_fetch, also for the re-reads of a parked
    fetch)."""
    budget = req.max_bytes if ctx.version >= 3 else 2**31 - 1
    min_one = True
    out: dict[tuple[str, int], PartitionResult] = {}
    for key, preq in parts.items():
        res = read_partition(ctx, params, key, preq, max(0, min(preq.max_bytes, budget)), min_one, diverging)
        if res.records_size:
            budget -= res.records_size
            min_one = False
        out[key] = res
    return out


def read_partition(ctx: RequestContext, params: FetchParams, key: tuple[str, int], preq: PartitionRequest,
                   limit: int, min_one: bool,
                   diverging: dict[tuple[str, int], tuple[int, int]] | None) -> PartitionResult:
    """One partition's read, at most `limit` bytes (at least one batch when `min_one`)."""
    rm = ctx.server.replica_manager
    res = PartitionResult()
    try:
        part = rm.get_partition(*key)
        # Kafka checks the epoch before the leadership (Partition.getLocalLog)
        check_leader_epoch(preq.current_leader_epoch, part.leader_epoch)
        if params.only_leader and not part.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log_ = part.log
        res.high_watermark = log_.high_watermark
        res.last_stable_offset = log_.last_stable_offset
        res.log_start_offset = log_.log_start_offset
        if params.client is not None and rm.replica_selector is not None:
            preferred = rm.find_preferred_read_replica(part, params.client, preq.fetch_offset, int(time.time() * 1000))
            if preferred is not None:  # no read: the consumer fetches there next (Kafka's readFromLog)
                res.preferred_read_replica = preferred
                res.records = b""
                return res
        if params.from_follower:
            # a follower reads past the high watermark, up to the log end (Kafka's
            # FetchIsolation.LOG_END), unless its log diverged from ours: then it is told
            # where our copy of its last epoch ends, to truncate there (KIP-595 / Fetch v12)
            epoch_end = diverging.get(key) if diverging else None
            if epoch_end is not None:
                res.diverging_epoch = epoch_end
                res.records = b""
                return res
            upper = log_.log_end_offset
            if rm.should_leader_throttle(part, params.replica_id):
                res.records = b""  # this follower waits for the throttled rate to fall
                return res
        elif params.isolation == LOG_END:  # a debugging client
            upper = log_.log_end_offset
        else:
            upper = res.last_stable_offset if params.isolation == TXN_COMMITTED else res.high_watermark
        info = log_.read(preq.fetch_offset, limit, upper, min_one)
        slice_ = info.records
        size = slice_.size if slice_ is not None else 0
        if size:
            res.records = slice_
            res.records_size = size
            if params.isolation == TXN_COMMITTED:
                res.aborted = [
                    AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in log_.collect_aborted_transactions(preq.fetch_offset, upper)
                ]
        else:
            res.records = b""
    except KafkaProtocolError as e:
        # Kafka's readFromLog answers every read error (OFFSET_OUT_OF_RANGE included) with
        # -1 offsets and no aborted list; a partition the metadata does not know is answered
        # earlier (FetchResponse.partitionResponse) with an empty aborted list
        res = PartitionResult(error=e.code, records=b"")
        if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            res.aborted = []
    return res


def build_response(ctx: RequestContext, fctx: Any, results: dict[tuple[str, int], PartitionResult]) -> FetchResponse:
    if fctx.error:
        return FetchResponse(throttle_time_ms=0, error_code=fctx.error, session_id=0, responses=[])
    return _response(fctx, results, fctx.select(results), _records)


def response_size(ctx: RequestContext, fctx: Any, results: dict[tuple[str, int], PartitionResult]) -> int:
    """The bytes the response would take on the wire after its size prefix (header, partition
    headers and records), computed without reading records or touching the fetch session:
    Kafka's fetchContext.getResponseSize, which the consumer fetch quota records. Records are
    counted by their size; their length prefix is counted as for an empty one (a byte or two
    less per partition with records than the wire)."""
    if fctx.error:
        return 0
    chosen = fctx.peek(results)
    response = _response(fctx, results, chosen, lambda r: b"")
    h = ctx.header
    frame = encode_response_frame(h.correlation_id, h.request_api_key, h.request_api_version, response)
    return sum(len(c) for c in frame) - 4 + sum(results[key].records_size for key in chosen)


def _response(fctx: Any, results: dict[tuple[str, int], PartitionResult], chosen: list[tuple[str, int]],
              records: Callable[[PartitionResult], Any]) -> FetchResponse:
    topics: list[FetchableTopicResponse] = []
    by_topic: dict[str, FetchableTopicResponse] = {}
    for key in chosen:
        r = results[key]
        t = by_topic.get(key[0])
        if t is None or topics[-1] is not t:
            t = FetchableTopicResponse(topic=key[0], partitions=[])
            by_topic[key[0]] = t
            topics.append(t)
        t.partitions.append(
            PartitionData(
                partition_index=key[1],
                error_code=r.error,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted_transactions=r.aborted,
                preferred_read_replica=r.preferred_read_replica,
                records=records(r),
                diverging_epoch=(NO_DIVERGING_EPOCH if r.diverging_epoch is None else
                                 EpochEndOffset(epoch=r.diverging_epoch[0], end_offset=r.diverging_epoch[1])),
                current_leader=NO_CURRENT_LEADER,
                snapshot_id=NO_SNAPSHOT_ID,
            )
        )
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=fctx.response_session_id, responses=topics)


def _records(r: PartitionResult) -> Any:
    """The records as the response carries them: a file region to stream, or bytes."""
    if not r.records_size:
        return b""
    if r.records_size >= STREAM_MIN_BYTES and type(r.records) is FileRecords:
        return r.records
    return r.records.read()


@api(1, 4, 12, eager=True)
async def handle(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    rm = ctx.server.replica_manager
    fetch: dict[tuple[str, int], PartitionRequest] = {}
    for t in req.topics:
        for p in t.partitions:
            fetch[(t.topic, p.partition)] = PartitionRequest(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=p.log_start_offset,
                last_fetched_epoch=p.last_fetched_epoch,
            )
    forgotten = [(t.topic, p) for t in (req.forgotten_topics_data or []) for p in t.partitions]
    now_ms = int(time.time() * 1000)
    fctx = rm.fetch_sessions.new_context(
        req.session_id if ctx.version >= 7 else 0,
        req.session_epoch if ctx.version >= 7 else -1,
        fetch,
        forgotten,
        req.replica_id >= 0,
        now_ms,
    )
    if fctx.error:
        return build_response(ctx, fctx, {})
    params = FetchParams.of(ctx, req)
    if req.replica_id < 0 and ctx.server.quotas.fetch.quotas:
        window_bytes = ctx.server.quotas.fetch.max_value_in_quota_window(*ctx.quota_entity)
        if window_bytes is not None:  # Kafka's maxQuotaWindowBytes bound on the response
            req.max_bytes = min(req.max_bytes, max(1, int(window_bytes)))
    denied = unauthorized(ctx, req.replica_id >= 0, fctx.partitions)
    parts = {k: v for k, v in fctx.partitions.items() if k not in denied} if denied else fctx.partitions
    diverging = (rm.record_follower_fetch(req.replica_id, parts, ctx.version >= 12, now_ms)
                 if req.replica_id >= 0 else None)
    results = read_partitions(ctx, req, params, parts, diverging)
    if req.max_wait_ms > 0 and parts and not _enough(results, req.min_bytes):
        limit = req.max_bytes if ctx.version >= 3 else 2**31 - 1
        results = await rm.delayed_fetch(
            list(parts), req.max_wait_ms, req.min_bytes, results,
            lambda key: read_partition(ctx, params, key, parts[key], min(parts[key].max_bytes, limit), True,
                                       diverging),
            lambda: read_partitions(ctx, req, params, parts, diverging),
        )
    if denied:
        results = {key: results[key] if key in results else
                   PartitionResult(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED, records=b"", aborted=[])
                   for key in fctx.partitions}
    if req.replica_id >= 0 and rm.leader_quota.bound != UNLIMITED:
        _record_throttled_bytes(rm, results)
    if params.client is not None:
        _log_read_replicas(rm, params.client, results)
    if req.replica_id < 0 and ctx.server.quotas.fetch.quotas:
        throttled = _consumer_quota(ctx, fctx, results)
        if throttled is not None:
            return throttled
    if req.replica_id < 0:  # Kafka's BytesOutPerSec counts consumers' bytes, not followers'
        stats = rm.topic_stats
        for key, r in results.items():
            if r.records_size:
                stats.record_bytes_out(key[0], r.records_size)
    response = build_response(ctx, fctx, results)
    if req.replica_id >= 0 and fctx.kind == "full" and response.session_id:
        # once per follower and leadership change or restart, unless its fetches stopped using
        # the session (each full fetch makes a new one): a line an operator can count
        log.info("Created fetch session for a follower", replica=req.replica_id, session_id=response.session_id,
                 partitions=len(fctx.partitions))
    return response


def _consumer_quota(ctx: RequestContext, fctx: Any, results: dict[tuple[str, int], PartitionResult]
                    ) -> FetchResponse | None:
    """consumer_byte_rate (KafkaApis.handleFetchRequest): the whole response's size recorded; over
    the quota the bytes are taken back and the answer is empty -- no partitions, no new session,
    an incremental session kept as it was -- with the throttle time, the connection muted for it."""
    size = response_size(ctx, fctx, results)
    manager = ctx.server.quotas.fetch
    throttle_ms = ctx.record_quota(manager, size)
    if throttle_ms <= 0:
        return None
    manager.unrecord(*ctx.quota_entity, size)
    return FetchResponse(throttle_time_ms=throttle_ms, error_code=0, responses=[],
                         session_id=fctx.response_session_id if fctx.kind == "incremental" else 0)


def unauthorized(ctx: RequestContext, from_follower: bool, parts: dict[tuple[str, int], Any]) -> set[tuple[str, int]]:
    """KafkaApis.handleFetchRequest's checks: a follower needs CLUSTER_ACTION on the cluster
    (else every partition is TOPIC_AUTHORIZATION_FAILED), a consumer READ on each topic."""
    if ctx.server.authorizer is None:
        return set()
    if from_follower:
        return set() if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else set(parts)
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, (t for t, _ in parts))
    return {key for key in parts if key[0] not in allowed}


def _record_throttled_bytes(rm: Any, results: dict[tuple[str, int], PartitionResult]) -> None:
    """The bytes of throttled partitions a follower is sent count against the leader's rate
    (Kafka's sizeOfThrottledPartitions: in-sync followers' bytes count too)."""
    quota = rm.leader_quota
    total = 0
    for key, r in results.items():
        if r.records_size:
            part = rm.partitions.get(key)
            if part is not None and quota.is_throttled(key[1], part.log.config.leader_replication_throttled_replicas):
                total += r.records_size
    quota.record(total)


def _log_read_replicas(rm: Any, client: ClientMetadata, results: dict[tuple[str, int], PartitionResult]) -> None:
    """Which broker serves a consumer's partitions, for operators (a line per change, not per
    fetch): on the leader, when the replica it sends a rack-aware client's partition to changes;
    on a follower, when it first serves a client's partition records."""
    seen = rm.read_replicas
    selecting = rm.replica_selector is not None and bool(client.rack_id)
    for key, r in results.items():
        part = rm.partitions.get(key) if not r.error else None
        if part is None:
            continue
        if part.is_leader:
            if not selecting:
                continue
            replica = r.preferred_read_replica
            before = seen.swap(("preferred", client.client_id, client.rack_id, key), replica)
            if replica != NO_PREFERRED_REPLICA and before != replica:
                log.info("Sending a consumer to its preferred read replica", preferred_read_replica=replica,
                         **_client_fields(key, client))
            elif replica == NO_PREFERRED_REPLICA and before not in (None, NO_PREFERRED_REPLICA):
                log.info("A consumer reads from the leader again", previous_read_replica=before,
                         **_client_fields(key, client))
        elif r.records_size and seen.swap(("served", client.client_id, client.rack_id, key), True) is None:
            log.info("Serving a consumer's fetches as a follower", leader=part.state.leader,
                     high_watermark=r.high_watermark, **_client_fields(key, client))


def _client_fields(key: tuple[str, int], client: ClientMetadata) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1], "client_id": client.client_id, "client_rack": client.rack_id,
            "client_address": client.client_address}


def _enough(results: dict[tuple[str, int], PartitionResult], min_bytes: int) -> bool:
    """Answer now: enough bytes, an error a client must see, or a preferred read replica (the
    consumer is to fetch elsewhere: Kafka answers those at once)."""
    return (any(r.error or r.preferred_read_replica != NO_PREFERRED_REPLICA for r in results.values())
            or sum(r.records_size for r in results.values()) >= min_bytes)
