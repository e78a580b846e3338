"""AddPartitionsToTxnManager: a partition leader asks transaction coordinators whether a
transactional produce's partitions are in the producer's ongoing transaction (KIP-890 part 1,
Kafka 3.9's AddPartitionsToTxnManager.scala).

* `verify_transaction` resolves the coordinator of the transactional id (the leader of its
  `__transaction_state` partition in the metadata cache, a live broker with an endpoint on the
  inter-broker listener; otherwise COORDINATOR_NOT_AVAILABLE at once, as Kafka's
  getTransactionCoordinator) and queues the transaction for that broker.
* Per coordinator broker one request is in flight at a time (Kafka's inflightNodes); whatever is
  queued meanwhile goes out as one AddPartitionsToTxn v4+ request with one `verify_only`
  transaction per transactional id (the batching KIP-890 asks for).
* One queued entry per transactional id and broker: a newer entry for the same id answers the
  queued one INVALID_PRODUCER_EPOCH (a higher epoch fenced it) or NETWORK_EXCEPTION (the same
  epoch: a retry, so the older one gets a retriable error); an entry with a lower epoch than the
  queued one is answered INVALID_PRODUCER_EPOCH itself and not sent.
* Answers, as Kafka's AddPartitionsToTxnHandler: a lost connection or a timeout is
  NETWORK_EXCEPTION for every partition; a coordinator that does not know v4 (an old broker)
  means no verification (every partition verified, as Kafka continues the produce); a
  top-level error goes to every partition (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE);
  per partition PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (producers expect it there) and
  TRANSACTION_ABORTABLE is passed on only to a request version that knows it (Produce v11+,
  TxnOffsetCommit v4+), older ones get INVALID_TXN_STATE (Kafka's TransactionSupportedOperation:
  defaultError / genericErrorSupported). Kafka decides this per request batch from the
  operation of the batch's first request; here each request gets the error for its own version.

Threading: the event loop; the awaits are the sends. The coordinator may be this broker (a
single node asks itself over its own listener, as Kafka does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.network_client import NetworkError, UnsupportedApiVersionError
from broker.txn.state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, error_name
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.network_client import NetworkClient

log = structlog.get_logger("odradek.txn.verification")

TopicPartition = tuple[str, int]

@dataclass(slots=True)
class _Pending:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    generic_error_supported: bool
    started: float
    future: asyncio.Future[dict[TopicPartition, int]]

    def answer(self, errors: dict[TopicPartition, int]) -> None:
        if not self.future.done():
            self.future.set_result(errors)

    def fail_all(self, error: int) -> None:
        self.answer(dict.fromkeys(self.partitions, error))


@dataclass(slots=True)
class _Node:
    queued: dict[str, _Pending] = field(default_factory=dict)
    task: asyncio.Task[Any] | None = None


class AddPartitionsToTxnManager:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        client: NetworkClient,
        partition_for: Callable[[str], int],
        *,
        inter_broker_listener: str,
        request_timeout_ms: int,
        spawn: Callable[[Any], asyncio.Task[Any]],
    ) -> None:
        """`partition_for`: the `__transaction_state` partition of a transactional id."""
        self._metadata_cache = metadata_cache
        self._client = client
        self._partition_for = partition_for
        self._listener = inter_broker_listener
        self._request_timeout_ms = request_timeout_ms
        self._spawn = spawn
        self._nodes: dict[int, _Node] = {}
        self._closed = False
        self.verifications = 0  # requests' transactions sent (for tests and the bench note)

    def _coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]] | None:
        """Kafka's getTransactionCoordinator: the live leader of the id's partition."""
        state = self._metadata_cache.partition(TRANSACTION_STATE_TOPIC, self._partition_for(transactional_id))
        if state is None or state.leader < 0:
            return None
        broker = self._metadata_cache.brokers.get(state.leader)
        address = broker.endpoint(self._listener) if broker is not None else None
        return None if address is None else (state.leader, address)

    async def verify_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition],
        generic_error_supported: bool,
    ) -> dict[TopicPartition, int]:
        """The partitions the coordinator did not confirm, with their error (empty: verified).
        `generic_error_supported`: the asking request's client knows TRANSACTION_ABORTABLE."""
        wanted = list(partitions)
        coordinator = None if self._closed else self._coordinator(transactional_id)
        if coordinator is None:
            return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node_id, address = coordinator
        self._client.update_node(node_id, *address)
        pending = _Pending(transactional_id, producer_id, producer_epoch, wanted, generic_error_supported,
                           time.monotonic(), asyncio.get_running_loop().create_future())
        node = self._nodes.setdefault(node_id, _Node())
        existing = node.queued.get(transactional_id)
        if existing is not None:
            if existing.producer_epoch <= producer_epoch:
                existing.fail_all(ErrorCode.INVALID_PRODUCER_EPOCH if existing.producer_epoch < producer_epoch
                                  else ErrorCode.NETWORK_EXCEPTION)
            else:
                return dict.fromkeys(wanted, ErrorCode.INVALID_PRODUCER_EPOCH)
        node.queued[transactional_id] = pending
        if node.task is None or node.task.done():
            node.task = self._spawn(self._send_loop(node_id, node))
        return await pending.future

    async def _send_loop(self, node_id: int, node: _Node) -> None:
        """Everything queued for the broker in one request, one request at a time, until none is
        queued."""
        while node.queued and not self._closed:
            batch, node.queued = node.queued, {}
            try:
                await self._send(node_id, batch)
            finally:
                for p in batch.values():  # a failure of ours: the produce is told to retry
                    p.fail_all(ErrorCode.NETWORK_EXCEPTION)

    async def _send(self, node_id: int, batch: dict[str, _Pending]) -> None:
        request = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnTransaction(
                transactional_id=p.transactional_id, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                verify_only=True, topics=_topics(p.partitions))
            for p in batch.values()])
        self.verifications += len(batch)
        try:
            response = await self._client.send(node_id, request, timeout_ms=self._request_timeout_ms)
        except UnsupportedApiVersionError:
            log.warning(f"AddPartitionsToTxn v4+ is not supported by broker {node_id}: its transactions are not "
                        "verified; continuing with the produce requests")
            for p in batch.values():
                p.answer({})
            return
        except NetworkError as e:
            log.warning(f"AddPartitionsToTxnRequest to broker {node_id} failed with a network exception", error=str(e))
            for p in batch.values():
                p.fail_all(ErrorCode.NETWORK_EXCEPTION)
            return
        assert isinstance(response, AddPartitionsToTxnResponse)
        if response.error_code != ErrorCode.NONE:
            log.error(f"AddPartitionsToTxnRequest to broker {node_id} returned {error_name(response.error_code)}")
            error = (ErrorCode.INVALID_TXN_STATE if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                     else response.error_code)
            for p in batch.values():
                p.fail_all(error)
            return
        for result in response.results_by_transaction:
            p = batch.get(result.transactional_id)
            if p is None:
                continue
            unverified: dict[TopicPartition, int] = {}
            for topic in result.topic_results:
                for r in topic.results_by_partition:
                    if r.partition_error_code != ErrorCode.NONE:
                        unverified[(topic.name, r.partition_index)] = _for_producer(
                            r.partition_error_code, p.generic_error_supported)
            p.answer(unverified)

    async def shutdown(self) -> None:
        """Answer what waits (NETWORK_EXCEPTION: the producer retries elsewhere) and close."""
        self._closed = True
        tasks = [n.task for n in self._nodes.values() if n.task is not None]
        for node in self._nodes.values():
            for p in node.queued.values():
                p.fail_all(ErrorCode.NETWORK_EXCEPTION)
            node.queued.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.close()


def _topics(partitions: list[TopicPartition]) -> list[AddPartitionsToTxnTopic]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]


def _for_producer(error: int, generic_error_supported: bool) -> int:
    """A coordinator's per-partition answer as the producer is told it (see the module
    docstring)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not generic_error_supported:
        return ErrorCode.INVALID_TXN_STATE
    return error
