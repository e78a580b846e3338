"""What the controller tests share: KafkaController instances in this process, each on its own
ZooKeeper session (optionally through a ZkProxy a test can cut) with a real NetworkClient as its
channel's sender, and RecordingBrokers registered in ZooKeeper as the brokers they talk to.
Everything opened is closed by `close()` (the fixture's teardown)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from broker.network_client import NetworkClient, NetworkClientConfig
from controller.zk.client import ZooKeeperClient
from controller.zk.controller import KafkaController, KafkaControllerConfig
from controller.zk.kafka_zk_client import KafkaZkClient
from tests.cluster.recording_broker import RecordingBroker
from tests.zookeeper import ZooKeeperServer

CHROOT = "/odradek"
WAIT = 15.0  # seconds: the bound of every wait for an event


class ControllerEnv:
    def __init__(self, zookeeper: ZooKeeperServer) -> None:
        self.zookeeper = zookeeper
        self.brokers: dict[int, RecordingBroker] = {}
        self.controllers: list[KafkaController] = []
        self._senders: list[NetworkClient] = []
        self._clients: list[ZooKeeperClient] = []
        self._admin: KafkaZkClient | None = None

    @property
    def connect(self) -> str:
        return self.zookeeper.connect_string(CHROOT)

    async def zk_client(self, connect: str | None = None, session_timeout_ms: int = 6000) -> KafkaZkClient:
        zk = await ZooKeeperClient(connect or self.connect, session_timeout_ms=session_timeout_ms,
                                   connection_timeout_ms=10_000, request_timeout_ms=10_000).start(create_chroot=True)
        self._clients.append(zk)
        return KafkaZkClient(zk)

    async def admin(self) -> KafkaZkClient:
        """A session of the test's own, for reading and writing znodes as a tool would."""
        if self._admin is None:
            self._admin = await self.zk_client()
            await self._admin.create_top_level_paths()
        return self._admin

    async def broker(self, broker_id: int, rack: str | None = None) -> RecordingBroker:
        b = await RecordingBroker(broker_id, rack).start()
        await b.register(self.connect)
        self.brokers[broker_id] = b
        return b

    async def controller(self, broker_id: int, *, connect: str | None = None, session_timeout_ms: int = 6000,
                         start: bool = True, **config: Any) -> KafkaController:
        kzk = await self.zk_client(connect, session_timeout_ms)
        sender = NetworkClient(NetworkClientConfig(client_id=f"controller-{broker_id}", request_timeout_ms=5000,
                                                   reconnect_backoff_ms=20, reconnect_backoff_max_ms=200))
        self._senders.append(sender)
        config.setdefault("auto_leader_rebalance_enable", False)  # tests that want it say so
        c = KafkaController(KafkaControllerConfig(broker_id, **config), kzk, sender)
        self.controllers.append(c)
        if start:
            c.startup()
        return c

    async def close(self) -> None:
        for c in self.controllers:
            await c.shutdown()
        for s in self._senders:
            await s.close()
        for b in self.brokers.values():
            await b.stop()
        for zk in self._clients:
            await zk.close()

    async def znode_json(self, path: str) -> tuple[Any, int]:
        data, stat = await (await self.admin()).get_data_and_stat(path)
        assert stat is not None, f"{path} does not exist"
        return json.loads(data), stat.version


async def first_active(controllers: list[KafkaController], timeout: float = WAIT) -> KafkaController:
    """The controller among `controllers` that becomes active first."""
    waits = {asyncio.ensure_future(c.wait_until(lambda c: c.is_active, timeout)): c for c in controllers}
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for f in done:
            f.result()
            return waits[f]
        raise TimeoutError("no controller became active")
    finally:
        for f in waits:
            f.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def idle(*controllers: KafkaController, timeout: float = WAIT) -> None:
    """Until each controller's event queue is drained."""
    for c in controllers:
        await asyncio.wait_for(c.event_manager.wait_idle(), timeout)
