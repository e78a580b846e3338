"""controller.zk.config_manager (Kafka's ZkConfigManager and ZkNodeChangeNotificationListener) on
a real ZooKeeper, with recording handlers: start-up applies every entity's overrides and then
the notifications present, later notifications are applied once each in sequence order, bad
ones are logged and skipped, and notifications older than the expiration are purged.

Every wait is on an event, bounded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from controller.zk.client import ZooKeeperClient
from controller.zk.config_manager import ZkConfigManager
from controller.zk.data import ConfigEntityChangeNotificationSequenceZNode
from controller.zk.kafka_zk_client import KafkaZkClient
from tests.zookeeper import ZooKeeperServer

WAIT = 15.0
CHANGES = "/config/changes"


class Recorder:
    """A ConfigHandler that records (type, entity, config) and lets the test wait for a count."""

    def __init__(self, entity_type: str, calls: list[tuple[str, str, dict[str, str]]], changed: asyncio.Condition,
                 refuse: str | None = None) -> None:
        self.entity_type, self.calls, self.changed, self.refuse = entity_type, calls, changed, refuse

    async def process_config_changes(self, entity: str, config: dict[str, str]) -> None:
        if entity == self.refuse:
            raise ValueError(f"refused {entity}")
        async with self.changed:
            self.calls.append((self.entity_type, entity, config))
            self.changed.notify_all()


@pytest.fixture
async def sessions(zookeeper: ZooKeeperServer) -> AsyncIterator[tuple[KafkaZkClient, KafkaZkClient]]:
    """(the writer's session, the manager's session) on one chroot with Kafka's paths."""
    opened = []
    for _ in range(2):
        c = await ZooKeeperClient(zookeeper.connect_string("/cm"), session_timeout_ms=6000, connection_timeout_ms=10_000,
                                  request_timeout_ms=10_000).start(create_chroot=True)
        opened.append(c)
    writer, reader = KafkaZkClient(opened[0]), KafkaZkClient(opened[1])
    await writer.create_top_level_paths()
    yield writer, reader
    for c in opened:
        await c.close()


def manager_with_recorders(zk: KafkaZkClient, refuse: str | None = None, **kw: int) -> tuple[
        ZkConfigManager, list[tuple[str, str, dict[str, str]]], asyncio.Condition]:
    calls: list[tuple[str, str, dict[str, str]]] = []
    changed = asyncio.Condition()
    handlers = {t: Recorder(t, calls, changed, refuse) for t in ("topics", "brokers")}
    return ZkConfigManager(zk, handlers, **kw), calls, changed


async def until(calls: list[object], changed: asyncio.Condition, count: int) -> None:
    async def wait() -> None:
        async with changed:
            await changed.wait_for(lambda: len(calls) >= count)
    await asyncio.wait_for(wait(), WAIT)


async def test_startup_applies_every_entity_then_each_notification_once_in_order(sessions):
    writer, reader = sessions
    await writer.set_or_create_entity_configs("topics", "b", {"y": "2"}, controller_check=False)  # no notification
    await writer.change_entity_config("topics", "a", {"x": "1"}, controller_check=False)
    await writer.change_entity_config("topics", "a", {"x": "2"}, controller_check=False)
    manager, calls, changed = manager_with_recorders(reader)
    await manager.startup()
    try:
        # the bootstrap (entities by type, then name), then the two notifications present, each
        # re-reading what ZooKeeper has now
        await until(calls, changed, 4)
        assert calls == [("topics", "a", {"x": "2"}), ("topics", "b", {"y": "2"}),
                         ("topics", "a", {"x": "2"}), ("topics", "a", {"x": "2"})]
        assert manager.config_change_listener.last_executed_change == 1

        # later changes: each once, in sequence order, whatever the watch delivered
        await writer.change_entity_config("brokers", "<default>", {"log.retention.ms": "5"}, controller_check=False)
        await writer.change_entity_config("topics", "b", {}, controller_check=False)
        await writer.change_entity_config("brokers", "7", {"message.max.bytes": "9"}, controller_check=False)
        await until(calls, changed, 7)
        passes = manager.config_change_listener.passes
        await writer.create_config_change_notification("topics/a")  # one more pass: nothing repeated
        await manager.config_change_listener.wait_for_pass(passes, WAIT)
        await until(calls, changed, 8)
        assert calls[4:] == [("brokers", "<default>", {"log.retention.ms": "5"}), ("topics", "b", {}),
                             ("brokers", "7", {"message.max.bytes": "9"}), ("topics", "a", {"x": "2"})]
        assert manager.config_change_listener.last_executed_change == 5
    finally:
        await manager.shutdown()


async def test_bad_notifications_are_logged_and_the_others_applied(sessions, caplog):
    writer, reader = sessions
    caplog.set_level(logging.INFO)
    create = ConfigEntityChangeNotificationSequenceZNode.create_path
    await writer.set_or_create_entity_configs("topics", "t", {"retention.ms": "1"}, controller_check=False)
    await writer.zk.create(create, b"not json", sequential=True)  # ignored (the old TopicConfigManager's)
    await writer.zk.create(create, b'{"version":3,"entity_path":"topics/t"}', sequential=True)
    await writer.zk.create(create, b'{"version":2,"entity_path":"widgets/w"}', sequential=True)
    await writer.zk.create(create, b'{"version":2,"entity_path":"topics/refused"}', sequential=True)
    await writer.zk.create(create, b'{"version":1,"entity_type":"topics","entity_name":"t"}', sequential=True)
    await writer.zk.create(create, b'{"version":2,"entity_path":"topics/t"}', sequential=True)
    manager, calls, changed = manager_with_recorders(reader, refuse="refused")
    await manager.startup()
    try:
        await until(calls, changed, 3)  # bootstrap of t, the v1 and the v2 notification
        await manager.config_change_listener.wait_for_pass(0, WAIT)
        assert calls == [("topics", "t", {"retention.ms": "1"})] * 3
        assert manager.config_change_listener.last_executed_change == 5
    finally:
        await manager.shutdown()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 3, errors
    assert "unsupported version '3'" in caplog.text
    assert "must have 'entity_path' starting with one of 'topics'/, 'brokers'/" in caplog.text
    assert "refused refused" in caplog.text
    assert "Processing override for entityType: topics, entity: t with config: {retention.ms=1}" in caplog.text
    assert "Processing override for entityPath: topics/t with config: HashMap(retention.ms -> 1)" in caplog.text


async def test_notifications_older_than_the_expiration_are_purged(sessions):
    writer, reader = sessions
    for n in range(3):
        await writer.change_entity_config("topics", "t", {"n": str(n)}, controller_check=False)
    manager, calls, changed = manager_with_recorders(reader, change_expiration_ms=60_000)
    listener = manager.config_change_listener
    await manager.startup()
    try:
        await listener.wait_for_pass(0, WAIT)
        assert len(await writer.get_children(CHANGES)) == 3  # young: kept
        real = listener.time_ms
        listener.time_ms = lambda: real() + 61_000  # a minute later
        await writer.change_entity_config("topics", "t", {"n": "3"}, controller_check=False)
        await listener.wait_for_pass(1, WAIT)
        # the four, read before the pass's "now", are older than a minute then: deleted
        assert await writer.get_children(CHANGES) == []
        assert listener.last_executed_change == 3
        # a new notification gets the next sequence and is applied, not taken for an old one
        await writer.change_entity_config("topics", "t", {"n": "4"}, controller_check=False)
        await until(calls, changed, 6)
        assert calls[-1] == ("topics", "t", {"n": "4"})
    finally:
        await manager.shutdown()
