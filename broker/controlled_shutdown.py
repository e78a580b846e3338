"""The broker side of a controlled shutdown (ZooKeeper mode): before a broker stops serving, it
asks the controller to move its leaderships to other replicas, so that clients see a leader
change (NOT_LEADER_OR_FOLLOWER, retriable) instead of a dead leader for a session timeout.

Kafka's KafkaServer.controlledShutdown: look up the controller in ZooKeeper (/controller, then
its /brokers/ids registration), send ControlledShutdown (v3: broker id and epoch) on the
inter-broker listener, done when it answers NONE with no partitions remaining; otherwise wait
`controlled.shutdown.retry.backoff.ms` and try again, `controlled.shutdown.max.retries` times in
all, then stop anyway ("unclean shutdown": the controller moves the leaderships once the
session expires). The log lines are Kafka's.

Each attempt -- the ZooKeeper reads included -- is bounded by `request.timeout.ms`: with
ZooKeeper gone, kazoo queues a read until it reconnects, which may be never (issue #21: a broker
sat for minutes after SIGTERM). So the whole procedure ends within max.retries x
(request.timeout.ms + retry.backoff.ms) whatever ZooKeeper or the controller do."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from broker.network_client import NetworkClient, NetworkClientConfig, NetworkError
from protocol.errors import ErrorCode, error_name
from protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse

log = logging.getLogger("kafka.server.KafkaServer")


class ControllerLookup(Protocol):
    """What is read of ZooKeeper (KafkaZkClient's methods): /controller and a registration."""

    async def get_controller_id(self) -> int | None: ...

    async def get_broker(self, broker_id: int) -> Any: ...

CONTROLLED_SHUTDOWN_VERSION = 3


class ControlledShutdown:
    """One controlled shutdown of broker `broker_id` (registered with `broker_epoch`)."""

    def __init__(self, zk: ControllerLookup, broker_id: int, broker_epoch: int, listener_name: str, *,
                 max_retries: int, retry_backoff_ms: int, request_timeout_ms: int, ssl_context: Any = None,
                 sasl: Any = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.listener_name = listener_name
        self.max_retries = max_retries
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.ssl_context = ssl_context  # the inter-broker listener is SSL
        self.sasl = sasl  # ... or SASL: the broker's own credentials
        self._controller_id: int | None = None  # whom the current attempt asks

    async def run(self) -> bool:
        """Try up to max_retries times; True when the controller moved every leadership."""
        log.info("Starting controlled shutdown")
        client = NetworkClient(NetworkClientConfig(client_id=f"broker-{self.broker_id}-controlled-shutdown",
                                                   request_timeout_ms=self.request_timeout_ms,
                                                   ssl_context=self.ssl_context, sasl=self.sasl))
        try:
            for attempt in range(self.max_retries):
                if await self._bounded_attempt(client):
                    return True
                remaining = self.max_retries - attempt - 1
                if remaining > 0:
                    await asyncio.sleep(self.retry_backoff_ms / 1000)
                    log.info("Retrying controlled shutdown (%d retries remaining)", remaining)
        finally:
            await client.close()
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
        return False

    async def _bounded_attempt(self, client: NetworkClient) -> bool:
        """One attempt within request.timeout.ms: ZooKeeper's lookup plus the request."""
        try:
            return await asyncio.wait_for(self._attempt(client), self.request_timeout_ms / 1000)
        except TimeoutError:
            log.warning("Error during controlled shutdown: no answer within request.timeout.ms (%dms) "
                        "(ZooKeeper or the controller unreachable?)", self.request_timeout_ms)
            if self._controller_id is not None:  # a request cut short: its connection goes too
                client.disconnect(self._controller_id, "controlled shutdown attempt timed out")
            return False

    async def _attempt(self, client: NetworkClient) -> bool:
        self._controller_id = None
        controller_id = self._controller_id = await self._controller_address(client)
        if controller_id is None:
            return False
        started = time.monotonic()
        try:
            response = await client.send(controller_id, ControlledShutdownRequest(
                broker_id=self.broker_id, broker_epoch=self.broker_epoch), version=CONTROLLED_SHUTDOWN_VERSION)
        except NetworkError as e:
            client.disconnect(controller_id, "controlled shutdown request failed")
            log.warning("Error during controlled shutdown, possibly because leader movement took longer than the "
                        "configured controller.socket.timeout.ms and/or request.timeout.ms: %s", e)
            return False
        assert isinstance(response, ControlledShutdownResponse)
        latency_ms = int((time.monotonic() - started) * 1000)
        if response.error_code != ErrorCode.NONE:
            log.info("Controlled shutdown request returned after %dms with error %s", latency_ms,
                     error_name(response.error_code))
            return False
        if response.remaining_partitions:
            remaining = ", ".join(f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions)
            log.info("Controlled shutdown request returned after %dms with partitions remaining to move: %s",
                     latency_ms, remaining)
            return False
        log.info("Controlled shutdown request returned successfully after %dms", latency_ms)
        return True

    async def _controller_address(self, client: NetworkClient) -> int | None:
        """The controller's id, its address (on the inter-broker listener) set in `client`; None
        (and Kafka's line) when ZooKeeper names no controller or it has no registration."""
        try:
            controller_id = await self.zk.get_controller_id()
            broker = None if controller_id is None else await self.zk.get_broker(controller_id)
        except Exception as e:  # ZooKeeper unreachable: this attempt fails, the next may not
            log.info("Could not read the controller from ZooKeeper: %s", e)
            return None
        if controller_id is None:
            log.info("No controller present in the metadata cache")
            return None
        endpoint = None if broker is None else broker.endpoint(self.listener_name)
        if endpoint is None:
            log.info("Broker registration for controller %d is not available in the metadata cache", controller_id)
            return None
        client.update_node(controller_id, endpoint.host or "localhost", endpoint.port)
        return controller_id
