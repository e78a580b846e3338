"""A ZooKeeper-mode broker's own use of ZooKeeper at start-up and across sessions, as Kafka 3.9's
`KafkaServer.startup` does it (initZkClient, getOrGenerateClusterId, createBrokerInfo,
registerBroker) and as its controller's state change handler re-registers after a new session
(`RegisterBrokerAndReelect`).

Why here and not in broker/: it speaks ZooKeeper through KafkaZkClient, which only the controller
side and the composition root may import (DESIGN.md §1); the broker keeps nothing of it but the
cluster id and the broker epoch, which `broker/server.py` reads from this object.

What it does, in Kafka's order and words:
  * `connect`: "Connecting to zookeeper on <zookeeper.connect>", one session
    (`zookeeper.session.timeout.ms`), bounded by `zookeeper.connection.timeout.ms`, the chroot
    created if absent, then Kafka's persistent paths (ZkData.PersistentZkPaths, null data).
  * `get_or_generate_cluster_id`: the id in /cluster/id, or a new one the first broker writes
    (first creator wins): "Cluster ID = <id>".
  * `broker_info`: the registration of `/brokers/ids/<id>`: every advertised listener with its
    security protocol, an empty host replaced by this host's canonical name and port 0 by the
    bound port, the rack, no features (what a 3.9 ZooKeeper-mode broker registers), JSON
    version 5. `check_endpoints_free` refuses endpoints another live broker registered
    (Kafka's `require` in createBrokerInfo).
  * `register`: the checked ephemeral registration; its czxid is the broker epoch, which fences
    controller requests meant for an earlier incarnation of this broker.
  * `register_at_startup` (beyond Kafka, which exits here): when /brokers/ids/<id> still belongs
    to another session -- this broker killed and restarted within its session timeout, as a
    container restart does -- wait (bounded, one log line saying why) for ZooKeeper to expire
    that session and delete the node, then register. A live broker with the same id keeps its
    node past the bound, and the start fails with Kafka's error as before.
  * after a session expired, the new session re-registers (a new czxid: a new broker epoch)
    before any other after-session handler runs (this one is registered first).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Iterable

from controller.zk.client import NodeExistsError, NodeHandler, ZooKeeperClient, ZooKeeperClientError
from controller.zk.data import Broker, BrokerInfo, EndPoint, SupportedVersionRange
from controller.zk.kafka_zk_client import KafkaZkClient, random_cluster_id

__all__ = ["STATE_CHANGE_HANDLER_NAME", "ZkBrokerRegistration", "advertised_endpoints"]

log = logging.getLogger("kafka.server.KafkaServer")

STATE_CHANGE_HANDLER_NAME = "broker-registration-state-change-handler"


def advertised_endpoints(
    listeners: Iterable[tuple[str, str, int]], protocols: dict[str, str],
    bound_port: Callable[[str], int] | None = None,
) -> tuple[EndPoint, ...]:
    """KafkaServer.createBrokerInfo's endpoints from (listener name, host, port) triples: the
    security protocol from `listener.security.protocol.map`, port 0 replaced by the listener's
    bound port, an empty host by this host's canonical name (InetAddress.getLocalHost
    .getCanonicalHostName)."""
    out = []
    for name, host, port in listeners:
        if port == 0 and bound_port is not None:
            port = bound_port(name)
        out.append(EndPoint(host or socket.getfqdn(), port, name, protocols.get(name, name)))
    return tuple(out)


class ZkBrokerRegistration:
    """The broker's registration in ZooKeeper, kept across sessions (see the module docstring).

    `broker_epoch` is -1 until the first registration, then the czxid of the current one."""

    name = STATE_CHANGE_HANDLER_NAME

    def __init__(self, kafka_zk: KafkaZkClient, broker_id: int) -> None:
        self.kafka_zk = kafka_zk
        self.broker_id = broker_id
        self.broker_info: BrokerInfo | None = None
        self.broker_epoch = -1
        self.cluster_id: str | None = None

    @classmethod
    async def connect(cls, connect_string: str, broker_id: int, *, session_timeout_ms: int,
                      connection_timeout_ms: int | None) -> ZkBrokerRegistration:
        """Open the broker's ZooKeeper session and create Kafka's persistent paths (KafkaServer
        .initZkClient). ZooKeeperClientTimeoutError when no connection comes in time."""
        log.info("Connecting to zookeeper on %s", connect_string)
        zk = ZooKeeperClient(connect_string, session_timeout_ms=session_timeout_ms,
                             connection_timeout_ms=connection_timeout_ms, name="Kafka server")
        await zk.start(create_chroot=True)
        kafka_zk = KafkaZkClient(zk)
        try:
            await kafka_zk.create_top_level_paths()
        except BaseException:
            await zk.close()
            raise
        registration = cls(kafka_zk, broker_id)
        zk.register_state_change_handler(registration)
        return registration

    @property
    def zk(self) -> ZooKeeperClient:
        return self.kafka_zk.zk

    async def get_or_generate_cluster_id(self) -> str:
        """KafkaServer.getOrGenerateClusterId: /cluster/id, created with a new id if absent."""
        cluster_id = await self.kafka_zk.get_cluster_id()
        if cluster_id is None:
            cluster_id = await self.kafka_zk.create_or_get_cluster_id(random_cluster_id())
        log.info("Cluster ID = %s", cluster_id)
        self.cluster_id = cluster_id
        return cluster_id

    def make_broker_info(self, endpoints: tuple[EndPoint, ...], rack: str | None) -> BrokerInfo:
        features: dict[str, SupportedVersionRange] = {}  # a 3.9 ZooKeeper-mode broker registers none
        self.broker_info = BrokerInfo(Broker(self.broker_id, endpoints, rack, features))
        return self.broker_info

    async def check_endpoints_free(self, info: BrokerInfo) -> None:
        """Kafka's createBrokerInfo requirement: no other live broker registered one of our
        advertised host:port pairs. ValueError with Kafka's message otherwise."""
        ours = [f"{e.host}:{e.port}" for e in info.broker.endpoints]
        for broker in await self.kafka_zk.get_all_brokers_in_cluster():
            if broker.id == self.broker_id:
                continue
            theirs = {f"{e.host}:{e.port}" for e in broker.endpoints}
            common = [e for e in ours if e in theirs]
            if common:
                raise ValueError(f"requirement failed: Configured end points {','.join(common)} in advertised "
                                 f"listeners are already registered by broker {broker.id}")

    async def register(self) -> int:
        """Register /brokers/ids/<id> (checked ephemeral) and keep its czxid as the broker epoch."""
        assert self.broker_info is not None, "make_broker_info first"
        self.broker_epoch = await self.kafka_zk.register_broker(self.broker_info)
        return self.broker_epoch

    async def register_at_startup(self, stale_wait_s: float) -> int:
        """`register`, waiting up to `stale_wait_s` for a registration left by an earlier session
        (a killed incarnation of this broker) to expire; NodeExistsError after that."""
        deadline = time.monotonic() + stale_wait_s
        logged = False
        while True:
            try:
                return await self.register()
            except NodeExistsError as e:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                if not logged:
                    log.warning("Broker %d is still registered in ZooKeeper by an earlier session (this broker "
                                "killed and restarted within zookeeper.session.timeout.ms, or another broker with "
                                "the same id): waiting up to %.0f s for that session to expire (%s)",
                                self.broker_id, remaining, e)
                    logged = True
                assert self.broker_info is not None  # register() needs it
                await self._wait_for_deletion(self.broker_info.path, remaining)

    async def _wait_for_deletion(self, path: str, timeout_s: float) -> None:
        """Until the znode at `path` is gone (a watch, not a poll) or `timeout_s` passes."""
        gone = asyncio.Event()
        # any change wakes the caller, which re-checks by registering again
        self.zk.register_znode_change_handler(
            NodeHandler(path, on_create=gone.set, on_delete=gone.set, on_change=gone.set))
        try:
            if await self.zk.exists(path, watch=True) is None:
                return
            try:
                await asyncio.wait_for(gone.wait(), timeout_s)
            except TimeoutError:
                pass
        finally:
            self.zk.unregister_znode_change_handler(path)

    # -- StateChangeHandler ------------------------------------------------------------------------

    def before_initializing_session(self) -> None:
        """Nothing to do before a new session: the ephemeral registration died with the old one."""

    async def after_initializing_session(self) -> None:
        """A new session after the old one expired: register again (a new broker epoch)."""
        if self.broker_info is None:
            return  # not registered yet: start-up registers
        previous = self.broker_epoch
        try:
            await self.register()
        except ZooKeeperClientError as e:
            log.error("Re-registering broker %d in ZooKeeper after a new session failed: %s", self.broker_id, e)
            return
        log.info("Re-registered broker %d after its ZooKeeper session expired: broker epoch %d (was %d)",
                 self.broker_id, self.broker_epoch, previous)

    async def close(self) -> None:
        """End the session: the registration goes at once (other brokers' controller sees the
        broker leave without waiting for the session timeout)."""
        self.zk.unregister_state_change_handler(self.name)
        await self.zk.close()
