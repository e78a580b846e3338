"""TransactionMarkerChannelManager: the transaction coordinator's marker sender (Kafka 3.9's
TransactionMarkerChannelManager.scala and TransactionMarkerRequestCompletionHandler.scala).

Once a transaction's PrepareCommit / PrepareAbort is in `__transaction_state` (EndTxn, the
epoch-fence abort of InitProducerId, or a coordinator that loaded it in that state), the
coordinator hands the transaction here with its CompleteCommit / CompleteAbort transit (whose
pending state is already claimed, so the id's requests answer CONCURRENT_TRANSACTIONS
meanwhile). This module then:

* Resolves each partition of the transaction to its current leader in the metadata cache and
  queues the partition for that broker. A partition whose topic is gone from the metadata
  (deleted) is dropped from the transaction, as Kafka does (its producer cannot have written
  to it either); one whose leader or leader's inter-broker endpoint is unknown waits for the
  metadata (looked at again every `RETRY_BACKOFF_MS`; Kafka's markersQueueForUnknownBroker).
* Per destination broker one sender task drains its queue into one WriteTxnMarkers request --
  every queued transaction's marker for that broker in one request, as Kafka's
  drainQueuedTransactionMarkers does -- sent over the broker's NetworkClient (the client the
  controller channel and the replica fetchers use; this owner has its own instance, as Kafka's
  marker channel has its own NetworkClient).
* Answers per partition as TransactionMarkerRequestCompletionHandler: NONE removes the partition
  from the transaction's metadata; UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR are retried to the
  partition's leader as it is then (after `RETRY_BACKOFF_MS`, so a leader change the metadata
  has not caught up with is not hammered); INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED
  mean the producer or the coordinator moved on: the transaction is abandoned here (Kafka's
  abortSending). A lost connection or a timed-out request retries every partition it carried.
  Other errors are illegal for a marker (Kafka throws); they are logged and retried.
* Before each send and on each answer the transaction is checked to be still this
  coordinator's: the id's metadata is the same object (not reloaded since), still in the
  Prepare state with the same producer id and epoch. Otherwise the sender stops (NOT_COORDINATOR:
  the new coordinator loads the Prepare record and sends the markers itself).
* When the metadata has no partitions left, the Complete* transit is written with acks=all
  (Kafka's maybeWriteTxnCompletion / tryAppendToLog): NONE completes the transaction (a retried
  EndTxn answers NONE, InitProducerId proceeds); NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
  stop (the coordinator moved); any other error is retried after `RETRY_BACKOFF_MS`, claiming
  the pending state again (the state manager clears it on a failed write).

The single broker: its leader is itself, and the markers go over the network to its own
listener, exactly as Kafka's coordinator does (Kafka never short-cuts to its ReplicaManager).
This keeps one path -- the one WriteTxnMarkers' handler already serves and tests -- for one
broker and for many, at the cost of a loopback round trip per batch.

Threading: everything on the event loop; the awaits are the sends, the backoffs and the write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.network_client import NetworkError, UnsupportedApiVersionError
from broker.txn.decisions import TransactionResult, prepare_complete_transaction_transit
from broker.txn.metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.txn.state_manager import CoordinatorEpochAndTxnMetadata, TransactionStateManager
from protocol.errors import ErrorCode, error_name
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.network_client import NetworkClient

log = structlog.get_logger("odradek.txn.markers")

# Kafka's retry.backoff.ms default: the pause before a partition is sent again
RETRY_BACKOFF_MS = 100

# TransactionMarkerRequestCompletionHandler: retried to the partition's current leader
RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
})
# the producer's epoch or the coordinator's moved on: nothing more to send for the transaction
ABANDONING_MARKER_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


@dataclass(eq=False)
class PendingCompleteTxn:
    """Kafka's PendingCompleteTxn: a transaction whose markers are being sent."""

    transactional_id: str
    metadata: TransactionMetadata
    result: TransactionResult
    producer_id: int
    producer_epoch: int
    transit: TxnTransitMetadata
    done: bool = False
    writing: bool = False

    @property
    def prepare_state(self) -> TransactionState:
        return (TransactionState.PREPARE_COMMIT if self.result == TransactionResult.COMMIT
                else TransactionState.PREPARE_ABORT)


@dataclass
class _BrokerQueue:
    """Partitions of transactions waiting for a WriteTxnMarkers to one broker."""

    entries: dict[PendingCompleteTxn, set[TopicPartition]] = field(default_factory=dict)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[Any] | None = None


class TransactionMarkerChannelManager:
    def __init__(
        self,
        state_manager: TransactionStateManager,
        metadata_cache: MetadataCache,
        client: NetworkClient,
        *,
        inter_broker_listener: str,
        request_timeout_ms: int,
        spawn: Callable[[Any], asyncio.Task[Any]],
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
    ) -> None:
        self._state_manager = state_manager
        self._metadata_cache = metadata_cache
        self._client = client
        self._listener = inter_broker_listener
        self._request_timeout_ms = request_timeout_ms
        self._spawn = spawn
        self._clock_ms = clock_ms
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._queues: dict[int, _BrokerQueue] = {}
        self._pending: dict[str, PendingCompleteTxn] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        self._closed = False

    # -- entry point --------------------------------------------------------------------------

    def add_txn_markers_to_send(
        self, coordinator_epoch: int, result: TransactionResult, transactional_id: str, transit: TxnTransitMetadata
    ) -> None:
        """Kafka's addTxnMarkersToSend: send the markers of the id's Prepare transaction (the
        metadata's partitions), then write `transit`. The coordinator's MarkerSender."""
        found = self._state_manager.get_transaction_state(transactional_id)
        if not isinstance(found, CoordinatorEpochAndTxnMetadata):
            log.info(f"Not sending the markers of {transactional_id}: this broker does not coordinate it now",
                     coordinator_epoch=coordinator_epoch)
            return
        txn = PendingCompleteTxn(transactional_id, found.metadata, result, transit.producer_id,
                                 transit.producer_epoch, transit)
        previous = self._pending.get(transactional_id)
        if previous is not None:
            previous.done = True
        self._pending[transactional_id] = txn
        log.debug(f"Sending {transactional_id}'s transaction markers for {result.name}",
                  coordinator_epoch=coordinator_epoch, partitions=len(found.metadata.topic_partitions))
        self._add_to_broker_queues(txn, set(found.metadata.topic_partitions))

    def pending_transactional_ids(self) -> set[str]:
        """The ids whose markers are being sent (tests, metrics)."""
        return {t for t, txn in self._pending.items() if not txn.done}

    async def shutdown(self) -> None:
        """Stop sending (the next coordinator resends what is left from the Prepare records)."""
        self._closed = True
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        tasks = [q.task for q in self._queues.values() if q.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.close()

    # -- routing ------------------------------------------------------------------------------

    def _current(self, txn: PendingCompleteTxn) -> CoordinatorEpochAndTxnMetadata | None:
        """The id's metadata and coordinator epoch if the transaction is still this sender's
        (see the module docstring), else None (and the transaction is abandoned)."""
        if txn.done or self._closed:
            return None
        found = self._state_manager.get_transaction_state(txn.transactional_id)
        if (isinstance(found, CoordinatorEpochAndTxnMetadata) and found.metadata is txn.metadata
                and txn.metadata.state == txn.prepare_state and txn.metadata.producer_id == txn.producer_id
                and txn.metadata.producer_epoch == txn.producer_epoch):
            return found
        log.info(f"Stopped sending the markers of {txn.transactional_id}: it is not this coordinator's "
                 "Prepare transaction any more", state=txn.metadata.state.state_name,
                 coordinator=found if isinstance(found, int) else None)
        self._abandon(txn)
        return None

    def _abandon(self, txn: PendingCompleteTxn) -> None:
        txn.done = True
        if self._pending.get(txn.transactional_id) is txn:
            del self._pending[txn.transactional_id]

    def _add_to_broker_queues(self, txn: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        """Kafka's addTxnMarkersToBrokerQueue: each partition to its leader's queue, a deleted
        one dropped, one with no known leader retried later."""
        if self._current(txn) is None:
            return
        unknown: set[TopicPartition] = set()
        cache = self._metadata_cache
        for tp in partitions:
            state = cache.partition(*tp)
            if state is None:
                log.info(f"Dropping {tp[0]}-{tp[1]} from {txn.transactional_id}'s markers: the partition is not "
                         "in the metadata (topic deleted)")
                txn.metadata.remove_partition(tp)
                continue
            broker = cache.brokers.get(state.leader)
            if broker is None or broker.endpoint(self._listener) is None:
                unknown.add(tp)
                continue
            queue = self._queues.get(state.leader)
            if queue is None:
                queue = self._queues[state.leader] = _BrokerQueue()
            queue.entries.setdefault(txn, set()).add(tp)
            queue.wakeup.set()
            if queue.task is None or queue.task.done():
                queue.task = self._spawn(self._send_loop(state.leader, queue))
        if unknown:
            self._retry_later(txn, unknown)
        self._maybe_write_txn_completion(txn)

    def _retry_later(self, txn: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        if self._closed:
            return

        def fire() -> None:
            self._timers.discard(handle)
            self._add_to_broker_queues(txn, partitions)

        handle = asyncio.get_running_loop().call_later(self._retry_backoff_s, fire)
        self._timers.add(handle)

    # -- sending ------------------------------------------------------------------------------

    async def _send_loop(self, broker_id: int, queue: _BrokerQueue) -> None:
        """One broker's sender: everything queued for it in one WriteTxnMarkers, one at a time."""
        while not self._closed:
            if not queue.entries:
                queue.wakeup.clear()
                await queue.wakeup.wait()
                continue
            batch, queue.entries = queue.entries, {}
            markers: list[WritableTxnMarker] = []
            sent: list[tuple[PendingCompleteTxn, set[TopicPartition]]] = []
            for txn, partitions in batch.items():
                found = self._current(txn)
                if found is None:
                    continue
                by_topic: dict[str, list[int]] = {}
                for topic, index in sorted(partitions):
                    by_topic.setdefault(topic, []).append(index)
                markers.append(WritableTxnMarker(
                    producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
                    transaction_result=txn.result == TransactionResult.COMMIT,
                    topics=[WritableTxnMarkerTopic(name=n, partition_indexes=p) for n, p in by_topic.items()],
                    coordinator_epoch=found.coordinator_epoch))
                sent.append((txn, partitions))
            if not markers:
                continue
            try:
                await self._send(broker_id, markers, sent)
            except Exception:  # a bug: the batch is not lost, its partitions go round again
                log.exception(f"Sending transaction markers to broker {broker_id} failed; retrying them")
                for txn, partitions in sent:
                    self._retry_later(txn, partitions)

    async def _send(
        self, broker_id: int, markers: list[WritableTxnMarker], sent: list[tuple[PendingCompleteTxn, set[TopicPartition]]]
    ) -> None:
        """One WriteTxnMarkers to the broker, and its answers handled."""
        broker = self._metadata_cache.brokers.get(broker_id)
        address = broker.endpoint(self._listener) if broker is not None else None
        if address is None:  # the broker left the metadata: resolve the leaders again
            for txn, partitions in sent:
                self._retry_later(txn, partitions)
            return
        self._client.update_node(broker_id, *address)
        try:
            response = await self._client.send(broker_id, WriteTxnMarkersRequest(markers=markers),
                                               timeout_ms=self._request_timeout_ms)
        except (NetworkError, UnsupportedApiVersionError) as e:
            # Kafka's completion handler on a disconnection: every partition to its leader again
            log.info(f"Sending WriteTxnMarkers to broker {broker_id} failed; retrying", error=str(e))
            for txn, partitions in sent:
                self._retry_later(txn, partitions)
            return
        assert isinstance(response, WriteTxnMarkersResponse)
        answers: dict[int, dict[TopicPartition, int]] = {}
        for m in response.markers:
            errors = answers.setdefault(m.producer_id, {})
            for t in m.topics:
                for p in t.partitions:
                    errors[(t.name, p.partition_index)] = p.error_code
        for txn, partitions in sent:
            self._on_marker_answers(broker_id, txn, partitions, answers.get(txn.producer_id, {}))

    def _on_marker_answers(
        self, broker_id: int, txn: PendingCompleteTxn, partitions: set[TopicPartition],
        errors: dict[TopicPartition, int],
    ) -> None:
        """TransactionMarkerRequestCompletionHandler for one transaction's partitions."""
        if self._current(txn) is None:
            return
        retry: set[TopicPartition] = set()
        for tp in partitions:
            error = errors.get(tp)
            if error == ErrorCode.NONE:
                txn.metadata.remove_partition(tp)
            elif error in ABANDONING_MARKER_ERRORS:
                log.info(f"Stopped sending the markers of {txn.transactional_id}: {tp[0]}-{tp[1]} answered "
                         f"{error_name(error)} (the producer or the coordinator moved on)")
                self._abandon(txn)
                return
            else:
                if error not in RETRIABLE_MARKER_ERRORS:
                    log.error(f"Unexpected answer to {txn.transactional_id}'s marker for {tp[0]}-{tp[1]} from "
                              f"broker {broker_id}: {'no answer' if error is None else error_name(error)}; retrying")
                retry.add(tp)
        if retry:
            # at info, as Kafka's completion handler logs each retried partition
            log.info(f"Sending {txn.transactional_id}'s transaction markers failed; retrying",
                     broker=broker_id, partitions=sorted(retry),
                     errors=sorted({error_name(errors.get(tp, -1)) for tp in retry}))
            self._retry_later(txn, retry)
        else:
            self._maybe_write_txn_completion(txn)

    # -- completion ---------------------------------------------------------------------------

    def _maybe_write_txn_completion(self, txn: PendingCompleteTxn) -> None:
        """Every marker is written: write the Complete* record (once)."""
        if not txn.metadata.topic_partitions and not txn.writing and not txn.done:
            txn.writing = True
            self._spawn(self._write_txn_completion(txn))

    async def _write_txn_completion(self, txn: PendingCompleteTxn) -> None:
        """Kafka's tryAppendToLog with its retry queue."""
        transit = txn.transit
        while True:
            found = self._current(txn)
            if found is None:
                return
            if txn.metadata.pending_state is None:  # a failed write cleared the claim: claim it again
                again = prepare_complete_transaction_transit(txn.metadata, txn.producer_id, txn.producer_epoch,
                                                             txn.result, self._clock_ms())
                if isinstance(again, ErrorCode):
                    log.warning(f"Not completing {txn.transactional_id}'s transaction: {error_name(again)}")
                    self._abandon(txn)
                    return
                transit = again
            error = await self._state_manager.append_transaction_to_log(
                txn.transactional_id, found.coordinator_epoch, transit)
            if error == ErrorCode.NONE:
                log.debug(f"Completed {txn.transactional_id}'s transaction: {transit.txn_state.state_name}")
                self._abandon(txn)
                return
            if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                log.info(f"Not completing {txn.transactional_id}'s transaction here: {error_name(error)} (the "
                         "new coordinator completes it)")
                self._abandon(txn)
                return
            log.warning(f"Writing {txn.transactional_id}'s {transit.txn_state.state_name} failed; retrying",
                        error=error_name(error))
            await asyncio.sleep(self._retry_backoff_s)
