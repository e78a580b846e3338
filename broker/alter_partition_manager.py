"""A leader changes its partition's ISR through the controller (Kafka's AlterPartitionManager, the
Kafka 3.9 path in ZooKeeper mode too): AlterPartition v1 to the active controller (found in the
metadata cache) with the leader epoch, the new ISR and the partition epoch the leader knows; the
controller compare-and-sets the state znode and answers the new state, which the leader then
uses. The proposal is the Partition's pending state (broker.partition): this manager only carries
it, and retries -- a controller that cannot be reached, a top-level error (NOT_CONTROLLER while a
new controller is elected, STALE_BROKER_EPOCH), or a partition error Kafka retries -- with a
backoff from RETRY_BACKOFF_MIN_S to RETRY_BACKOFF_MAX_S, until the controller answers or the
proposal is superseded (a LeaderAndIsr replaced the pending state). Dropping an unanswered change
instead would leave the leader unsure whether the controller applied it: Kafka's
DefaultAlterPartitionManager retries the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from broker.network_client import NetworkClient, NetworkClientConfig, NetworkError
from protocol.errors import ErrorCode, error_name
from protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.alter_partition_request import PartitionData, TopicData

log = structlog.get_logger("odradek.alter_partition")

ALTER_PARTITION_VERSION = 1  # topic names, a plain ISR list, the leader recovery state
RETRY_BACKOFF_MIN_S = 0.05  # Kafka's manager retries after 50 ms
RETRY_BACKOFF_MAX_S = 1.0  # ... and its channel backs off reconnecting up to 1 s
RETRY_LOG_EVERY = 20  # an unanswered change is logged at its first failure, then every 20th


@dataclass(frozen=True)
class IsrChange:
    """What the controller accepted: the partition's new state."""

    leader_epoch: int
    isr: list[int]
    partition_epoch: int


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 controller: Callable[[], tuple[int, str, int] | None], request_timeout_ms: int,
                 client_factory: Callable[[NetworkClientConfig], Any] = NetworkClient) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller = controller  # (id, host, port) of the active controller, or None
        self.client = client_factory(NetworkClientConfig(client_id=f"broker-{broker_id}-alter-partition",
                                                         request_timeout_ms=request_timeout_ms))

    async def submit(self, tp: tuple[str, int], leader_epoch: int, new_isr: list[int] | tuple[int, ...],
                     partition_epoch: int, superseded: Callable[[], bool],
                     retriable: Callable[[int], bool]) -> IsrChange | int | None:
        """Ask for the ISR `new_isr` until answered: the accepted state, or an error code that
        `retriable` says is final; None once `superseded()` (nothing more to ask)."""
        backoff = RETRY_BACKOFF_MIN_S
        attempt = 0
        while not superseded():
            attempt += 1
            outcome = await self.send_once(tp, leader_epoch, new_isr, partition_epoch)
            if isinstance(outcome, IsrChange) or not retriable(outcome):
                if attempt > 1:
                    log.info("AlterPartition answered after retries", topic=tp[0], partition=tp[1], attempts=attempt)
                return outcome
            if attempt == 1 or attempt % RETRY_LOG_EVERY == 0:
                log.info("AlterPartition not answered: retrying", topic=tp[0], partition=tp[1],
                         proposed=list(new_isr), error=error_name(outcome), attempt=attempt,
                         backoff_ms=int(backoff * 1000))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return None

    async def send_once(self, tp: tuple[str, int], leader_epoch: int, new_isr: list[int] | tuple[int, ...],
                        partition_epoch: int) -> IsrChange | int:
        """One AlterPartition: the accepted state, or the error code (NOT_CONTROLLER when there
        is no controller to ask, REQUEST_TIMED_OUT when it could not be reached)."""
        controller = self.controller()
        if controller is None:  # e.g. the controller died and no successor is known yet
            return ErrorCode.NOT_CONTROLLER
        cid, host, port = controller
        self.client.update_node(cid, host, port)
        request = AlterPartitionRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch(), topics=[
            TopicData(topic_name=tp[0], partitions=[PartitionData(
                partition_index=tp[1], leader_epoch=leader_epoch, new_isr=sorted(new_isr),
                leader_recovery_state=0, partition_epoch=partition_epoch)])])
        try:
            response = await self.client.send(cid, request, version=ALTER_PARTITION_VERSION)
        except NetworkError:
            return ErrorCode.REQUEST_TIMED_OUT
        assert isinstance(response, AlterPartitionResponse)
        if response.error_code != ErrorCode.NONE:
            return response.error_code
        for t in response.topics:
            for p in t.partitions:
                if (t.topic_name, p.partition_index) == tp:
                    if p.error_code != ErrorCode.NONE:
                        return p.error_code
                    return IsrChange(p.leader_epoch, list(p.isr), p.partition_epoch)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def close(self) -> None:
        await self.client.close()
