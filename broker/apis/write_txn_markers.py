"""WriteTxnMarkers (key 27), versions 0-1: a transaction coordinator tells the leaders of a
transaction's partitions to end it (Kafka 3.9's KafkaApis.handleWriteTxnMarkersRequest).

Served by every broker (the spec's listeners are "zkBroker" and "broker"; only a KRaft
controller does not serve it), so a single node and a ZooKeeper-mode broker both advertise it.
The markers come from a transaction coordinator's marker sender (broker/txn/markers.py, this
broker's own included: a single node sends them to itself over its listener, as Kafka does), or
from a test playing one.

Per marker (producer id and epoch, COMMIT or ABORT, coordinator epoch, partitions):

* A partition this broker does not host with a log -- unknown, not a replica here, offline, or
  already deleted by a topic deletion's StopReplica -- is UNKNOWN_TOPIC_OR_PARTITION, decided
  before any append (Kafka's replicaManager.getMagic is empty for it). Kafka's other pre-check,
  UNSUPPORTED_FOR_MESSAGE_FORMAT for a log whose message format is below v2, cannot happen:
  Odradek's logs are RecordBatch v2 only (message.format.version is accepted and ignored, as
  Kafka 3.x does from inter.broker.protocol.version 3.0).
* Every other partition gets one control batch (MemoryRecords.withEndTransactionMarker: the
  producer id and epoch, no sequence, transactional + control, one EndTransactionMarker record
  with the coordinator epoch), appended as ReplicaManager.appendRecords does for it: acks=all
  within request.timeout.ms, internal topics allowed, origin COORDINATOR. So the partition's
  errors are the produce path's: NOT_LEADER_OR_FOLLOWER on a follower, NOT_ENOUGH_REPLICAS
  (ISR under min.insync.replicas), NOT_ENOUGH_REPLICAS_AFTER_APPEND / REQUEST_TIMED_OUT while
  waiting for the ISR, KAFKA_STORAGE_ERROR; and the producer state's checks for the
  COORDINATOR origin (storage.producer_state, ProducerAppendInfo.appendEndTxnMarker):
  INVALID_PRODUCER_EPOCH for a producer epoch older than the partition's,
  TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the last marker's. A marker
  for a producer with no open transaction on the partition is written all the same (it records
  the producer's epoch and coordinator epoch), as Kafka does.
* The append completes the producer's open transaction: the last stable offset moves past it
  (ListOffsets/Fetch read_committed), an ABORT is indexed in the segment's ``.txnindex``, and
  followers replicate the control batch like any other (storage.log.append_as_follower rebuilds
  the same producer state and aborted-transaction index from it).
* The markers of one request are appended in request order and waited for together; the
  answer lists, per producer id, every partition named with its error. Two markers with the same
  producer id share one entry, as Kafka's map keyed by producer id does. A partition named twice
  in one marker gets one control batch and one answer (Kafka 3.9.2 builds the same map but never
  answers such a request; its coordinator never sends one).
* ``__consumer_offsets`` partitions: the marker is appended like any other, then -- for the
  partitions whose append succeeded, before the answer -- the group coordinator completes the
  producer's pending transactional offsets (TxnOffsetCommit) of the groups on them, as Kafka's
  GroupCoordinator.onTransactionCompleted: COMMIT makes them the groups' committed offsets
  (each unless a plain commit written after it is there), ABORT drops them. The group
  coordinator's loader replays the same markers from the log after a restart or a leader
  change, so the outcome does not depend on which broker saw the marker's request.
* No authorisation: Kafka requires ClusterAction (or Alter) on the cluster, which comes with
  the authorizer (not built yet), as for every other request.
"""

from __future__ import annotations

import asyncio

from broker.apis.registry import api
from broker.context import RequestContext
from broker.group.coordinator import GROUP_METADATA_TOPIC
from broker.replica_manager import ProduceResult
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.messages.write_txn_markers_request import WritableTxnMarker
from protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from protocol.records import build_control_batch
from storage.producer_state import AppendOrigin

TopicPartition = tuple[str, int]


async def _write_marker(ctx: RequestContext, marker: WritableTxnMarker) -> dict[TopicPartition, int]:
    """One marker's control batches appended to the partitions it names that this broker hosts
    (acks=all); the error code of every partition it names."""
    rm = ctx.server.replica_manager
    errors: dict[TopicPartition, int] = {}
    entries: dict[TopicPartition, bytes] = {}  # a partition named twice gets one marker, as Kafka's map
    for t in marker.topics:
        for index in t.partition_indexes:
            tp = (t.name, index)
            if tp not in rm.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries[tp] = build_control_batch(marker.transaction_result, marker.coordinator_epoch,
                                                  marker.producer_id, marker.producer_epoch)
    if entries:
        results: dict[TopicPartition, ProduceResult] = await rm.append_records(
            list(entries.items()), -1, internal_topics_allowed=True, timeout_ms=ctx.server.config["request.timeout.ms"],
            origin=AppendOrigin.COORDINATOR)
        errors.update((tp, r.error) for tp, r in results.items())
        completed = [p for (topic, p), r in results.items() if topic == GROUP_METADATA_TOPIC and r.error == ErrorCode.NONE]
        if completed:
            ctx.server.group_coordinator.on_transaction_completed(
                marker.producer_id, completed, marker.transaction_result)
    return errors


@api(27, 0, 1)
async def handle(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):  # the coordinator's principal needs CLUSTER_ACTION: every partition refused
        outcomes = [{(t.name, i): ErrorCode.CLUSTER_AUTHORIZATION_FAILED for t in m.topics for i in t.partition_indexes}
                    for m in req.markers]
    else:
        outcomes = await asyncio.gather(*(_write_marker(ctx, m) for m in req.markers))
    by_producer: dict[int, dict[TopicPartition, int]] = {}
    for marker, errors in zip(req.markers, outcomes, strict=True):
        by_producer.setdefault(marker.producer_id, {}).update(errors)
    markers = []
    for producer_id, errors in by_producer.items():
        topics: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
        for (topic, index), code in errors.items():
            topics.setdefault(topic, []).append(
                WritableTxnMarkerPartitionResult(partition_index=index, error_code=code))
        markers.append(WritableTxnMarkerResult(producer_id=producer_id, topics=[
            WritableTxnMarkerTopicResult(name=name, partitions=parts) for name, parts in topics.items()]))
    return WriteTxnMarkersResponse(markers=markers)
