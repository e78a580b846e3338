"""A stand-in broker for the controller's tests: a real asyncio TCP server that decodes every Kafka
frame it is sent with our protocol/ codecs, records the request, and answers as a Kafka 3.9 broker
would (ApiVersions with the inter-broker APIs; LeaderAndIsr / UpdateMetadata / StopReplica with no
error, per partition), and that registers in ZooKeeper on its own session as Kafka brokers do.

Why: the controller's outbound requests (what, to whom, in which order, at which version, with
which epochs) are what its tests check, before the broker side of issue #14 handles them for real.
`kill()` is a broker's death as the cluster sees it: its ZooKeeper session ends (its registration
goes) and its connections drop. Every wait is on a recorded request, bounded by the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.zk.client import ZooKeeperClient
from controller.zk.data import Broker, BrokerInfo, EndPoint
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.errors import ErrorCode
from protocol.framing import encode_response_frame, parse_request
from protocol.messages import (
    ApiVersionsResponse,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from protocol.messages.api_versions_response import ApiVersion
from protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrTopicError,
)
from protocol.messages.stop_replica_response import StopReplicaPartitionError

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, API_VERSIONS = 4, 5, 6, 18
# what a Kafka 3.9 broker advertises for the controller's APIs
ADVERTISED = {API_VERSIONS: (0, 3), LEADER_AND_ISR: (0, 7), STOP_REPLICA: (0, 4), UPDATE_METADATA: (0, 8)}


@dataclass
class Recorded:
    api_key: int
    version: int
    request: Any


class RecordingBroker:
    """One fake broker: `start()`, `register(connect)`, `requests`, `wait_for(...)`, `kill()`."""

    def __init__(self, broker_id: int, rack: str | None = None) -> None:
        self.broker_id = broker_id
        self.rack = rack
        self.port = 0
        self.requests: list[Recorded] = []
        self.epoch = -1
        self.zk: ZooKeeperClient | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._changed = asyncio.Condition()
        # called with each request received (after it is recorded), before it is answered
        self.on_request: list[Callable[[int, Any], None]] = []
        # partitions in a failed log dir: LeaderAndIsr answers KAFKA_STORAGE_ERROR for them
        self.offline: set[tuple[str, int]] = set()
        # api key -> gate: requests of that kind are answered only once the gate is set
        self.hold: dict[int, asyncio.Event] = {}

    async def start(self) -> RecordingBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(Broker(self.broker_id, (EndPoint("127.0.0.1", self.port, "PLAINTEXT", "PLAINTEXT"),),
                                 self.rack))

    async def register(self, connect: str, session_timeout_ms: int = 6000) -> int:
        """Register /brokers/ids/<id> on a session of our own; returns the broker epoch."""
        self.zk = await ZooKeeperClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=10_000,
                                        request_timeout_ms=10_000, name=f"broker-{self.broker_id}").start(
            create_chroot=True)
        kzk = KafkaZkClient(self.zk)
        await kzk.create_top_level_paths()
        self.epoch = await kzk.register_broker(self.info)
        return self.epoch

    async def kill(self) -> None:
        """The broker dies: its session ends (registration gone), its connections drop."""
        if self.zk is not None:
            await self.zk.close()
            self.zk = None
        await self.stop()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):
                w.transport.abort()
            await self._server.wait_closed()
            self._server = None
        if self.zk is not None:
            await self.zk.close()
            self.zk = None

    # -- what was received ----------------------------------------------------------------------

    def of(self, api_key: int) -> list[Any]:
        return [r.request for r in self.requests if r.api_key == api_key]

    async def wait_for(self, predicate: Callable[[RecordingBroker], Any], timeout: float = 15.0) -> Any:
        """Until `predicate(self)` is truthy (re-checked at every request received); its value."""
        async def check() -> Any:
            async with self._changed:
                while not (value := predicate(self)):
                    await self._changed.wait()
                return value
        return await asyncio.wait_for(check(), timeout)

    # -- serving --------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, body = parse_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                if key != API_VERSIONS:
                    async with self._changed:
                        self.requests.append(Recorded(key, version, body))
                        self._changed.notify_all()
                    for hook in self.on_request:
                        hook(key, body)
                    if (gate := self.hold.get(key)) is not None:
                        await gate.wait()
                writer.writelines(encode_response_frame(header.correlation_id, key, version, self._answer(key, body)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()

    def _answer(self, api_key: int, request: Any) -> Any:
        if api_key == API_VERSIONS:
            return ApiVersionsResponse(error_code=0, api_keys=[
                ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(ADVERTISED.items())])
        if api_key == LEADER_AND_ISR:
            return LeaderAndIsrResponse(error_code=0, topics=[
                LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=[
                    LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=(
                        ErrorCode.KAFKA_STORAGE_ERROR if (t.topic_name, p.partition_index) in self.offline else 0))
                    for p in t.partition_states])
                for t in request.topic_states])
        if api_key == UPDATE_METADATA:
            return UpdateMetadataResponse(error_code=0)
        if api_key == STOP_REPLICA:
            return StopReplicaResponse(error_code=0, partition_errors=[
                StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index, error_code=0)
                for t in request.topic_states for p in t.partition_states])
        raise AssertionError(f"unexpected api key {api_key}")
