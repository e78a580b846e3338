"""A leader changes its partition's ISR through the controller (Kafka's AlterPartitionManager, the
Kafka 3.9 path in ZooKeeper mode too): AlterPartition v1 to the active controller (found in the
metadata cache) with the leader epoch, the new ISR and the partition epoch the leader knows; the
controller compare-and-sets the state znode and answers the new state, which the leader then
uses. One change per partition in flight; a failed or refused one is dropped (the next follower
fetch or ISR check proposes again), as Kafka's does after its retries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.network_client import NetworkClient, NetworkClientConfig, NetworkError
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.alter_partition_request import PartitionData, TopicData

log = structlog.get_logger("odradek.alter_partition")

ALTER_PARTITION_VERSION = 1  # topic names, a plain ISR list, the leader recovery state


@dataclass(frozen=True)
class IsrChange:
    """What the controller accepted: the partition's new state."""

    leader_epoch: int
    isr: list[int]
    partition_epoch: int


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 controller: Callable[[], tuple[int, str, int] | None], request_timeout_ms: int) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller = controller  # (id, host, port) of the active controller, or None
        self.client = NetworkClient(NetworkClientConfig(client_id=f"broker-{broker_id}-alter-partition",
                                                        request_timeout_ms=request_timeout_ms))
        self.in_flight: set[tuple[str, int]] = set()

    async def submit(self, tp: tuple[str, int], leader_epoch: int, new_isr: list[int],
                     partition_epoch: int) -> IsrChange | int:
        """Ask for the ISR `new_isr`; the accepted state, or the error code (NOT_CONTROLLER when
        there is no controller to ask, REQUEST_TIMED_OUT when it could not be reached)."""
        self.in_flight.add(tp)
        try:  # whatever happens, the partition may propose again afterwards
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
            except NetworkError as e:
                log.info("AlterPartition not answered", topic=tp[0], partition=tp[1], controller=cid, error=str(e))
                return ErrorCode.REQUEST_TIMED_OUT
        finally:
            self.in_flight.discard(tp)
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
